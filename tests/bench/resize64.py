#!/usr/bin/python3
"""The transform bench's transform (tests/bench/transform.sh): decodes a
JPEG, resizes it to 64x64 (bilinear) and writes a PNG. Run by shardfs as
[transform resize64] in worker mode through shardfs.transform.main(); the
bench imports resize() to write the local reference PNGs with the very
same function, and decode_resize() is what the in-DataLoader baseline does
in its __getitem__ (the same decode and resize, without the PNG)."""
import io
import os
import sys

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from PIL import Image  # noqa: E402

SIZE = (64, 64)


def decode_resize(data):
    return Image.open(io.BytesIO(data)).convert("RGB").resize(SIZE, Image.BILINEAR)


def resize(data):
    out = io.BytesIO()
    decode_resize(data).save(out, format="PNG")
    return out.getvalue()


if __name__ == "__main__":
    from shardfs.transform import main  # noqa: E402

    main(resize)
