#!/usr/bin/python3
"""test_transform's checks of a transform tree (docs/DESIGN.md §3,
"Transform views") against the raw view of the same mount.

  xfcheck.py tree RAW XF FN SUFFIX REPLACE
      RAW is a raw rank directory (MOUNT/rank-0, MOUNT/epoch-2/rank-0...),
      XF the transform tree's one (MOUNT/transform-NAME/rank-0...). Every
      raw file must appear in XF under its renamed name (SUFFIX, REPLACE
      "true" or "false"), with st_size and bytes f(raw bytes), where FN is
      "upper" (bytes.upper(), as tr a-z A-Z), "upper64" (that 64 times
      over) or "resize"
      (tests/unit/transform/resize.py's function). A file whose output
      would be empty must fail with EIO (an empty output is a failed run:
      transform/transform.h), and so may the files named by --eio-ok REL
      (raw relative paths), or any file with --eio-any; any other error
      or byte is a failure. Prints
      "files N eio M".
  xfcheck.py order RAW_ORDER XF_ORDER SUFFIX REPLACE
      XF_ORDER's lines must be RAW_ORDER's renamed, in order.
  xfcheck.py names DIR
      The names under DIR (os.walk, no stat of a file: a listing).
"""
import errno
import os
import sys


def rename(path, suffix, replace):
    d, _, name = path.rpartition("/")
    if replace:
        dot = name.rfind(".")
        if dot > 0:
            name = name[:dot]
    return (d + "/" if d else "") + name + suffix


def fn_of(name):
    if name == "upper":
        table = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
        return lambda b: b.translate(table)
    if name == "upper64":
        table = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
        return lambda b: b.translate(table) * 64
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "unit", "transform"))
    import resize  # noqa: E402

    return resize.resize


def tree(raw, xf, fn, suffix, replace, eio_ok):
    f = fn_of(fn)
    n = eio = 0
    for d, _, files in os.walk(raw):
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(d, name), raw)
            out = os.path.join(xf, rename(rel, suffix, replace))
            with open(os.path.join(d, name), "rb") as fh:
                want = f(fh.read())
            try:
                if not want:
                    os.stat(out)
                    sys.exit(f"{out}: an empty output is not EIO")
                size = os.stat(out).st_size
                with open(out, "rb") as fh:
                    got = fh.read()
            except OSError as e:
                if e.errno == errno.EIO and ("*" in eio_ok or rel in eio_ok or not want):
                    eio += 1
                    continue
                sys.exit(f"{out}: {e}")
            if got != want or size != len(want):
                sys.exit(f"{out}: {len(got)} bytes (st_size {size}), want {len(want)}: wrong bytes")
            n += 1
    print(f"files {n} eio {eio}")


def order(raw_order, xf_order, suffix, replace):
    with open(raw_order) as fh:
        raw = fh.read().splitlines()
    with open(xf_order) as fh:
        xf = fh.read().splitlines()
    want = []
    for line in raw:
        path, tab, pad = line.partition("\t")
        want.append(rename(path, suffix, replace) + tab + pad)
    if xf != want:
        sys.exit(f"{xf_order}: {xf[:3]}... want {want[:3]}... ({len(xf)} vs {len(want)} lines)")
    print(f"lines {len(xf)}")


def main():
    cmd = sys.argv[1]
    if cmd == "tree":
        eio_ok = set()
        args = sys.argv[2:]
        while args and args[0] in ("--eio-ok", "--eio-any"):
            if args[0] == "--eio-any":
                eio_ok.add("*")
                args = args[1:]
                continue
            eio_ok.add(args[1])
            args = args[2:]
        raw, xf, fn, suffix, replace = args
        tree(raw, xf, fn, suffix, replace == "true", eio_ok)
    elif cmd == "order":
        raw_order, xf_order, suffix, replace = sys.argv[2:]
        order(raw_order, xf_order, suffix, replace == "true")
    elif cmd == "names":
        for d, dirs, files in os.walk(sys.argv[2]):
            for name in dirs + files:
                print(os.path.relpath(os.path.join(d, name), sys.argv[2]))
    else:
        sys.exit("usage: see the file comment")


if __name__ == "__main__":
    main()
