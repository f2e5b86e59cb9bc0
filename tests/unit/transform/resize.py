#!/usr/bin/python3
"""check_transform's real transform: decodes a JPEG, resizes it to 64x64
and writes a PNG, through shardfs.transform.main() (process or worker
mode, as SHARDFS_TRANSFORM_MODE or --worker/--process says). The suite
compares what the runner returns with this script run directly."""
import io
import os
import sys

sys.path.insert(
    0,
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"),
)
from PIL import Image  # noqa: E402

from shardfs.transform import main  # noqa: E402


def resize(data):
    im = Image.open(io.BytesIO(data)).convert("RGB")
    im = im.resize((64, 64), Image.BILINEAR)
    out = io.BytesIO()
    im.save(out, format="PNG")
    return out.getvalue()


if __name__ == "__main__":
    main(resize)
