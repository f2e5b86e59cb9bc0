#!/usr/bin/python3
"""Writes a deterministic 320x240 JPEG: gen_jpeg.py SEED OUT."""
import random
import sys

from PIL import Image

seed, out = int(sys.argv[1]), sys.argv[2]
rng = random.Random(seed)
im = Image.new("RGB", (320, 240))
px = im.load()
for y in range(240):
    for x in range(320):
        px[x, y] = ((x * 3 + seed) % 256, (y * 5 + rng.randrange(16)) % 256, (x ^ y) % 256)
im.save(out, format="JPEG", quality=90)
