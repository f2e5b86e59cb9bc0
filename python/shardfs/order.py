"""Order files: ``.shardfs/[epoch-E/[skip-K[-of-W]/]]rank-R.order``.

One line per position of the rank's list, in read order, each ending in
``\\n``:

- a file view: ``KEY``, or ``KEY<TAB>pad`` for a pad (an item repeated
  to even the ranks' counts; its file is in another rank's directory, so a
  rank's tree holds only its non-pad keys);
- a record view: ``KEY<TAB>RECORD`` (RECORD: the record's index within
  the object KEY, from 0), ``KEY<TAB>RECORD<TAB>pad`` for a pad.

KEY is the object's key as in the manifest: ``%``, and every byte below
0x20 (TAB, LF and CR included), written as ``%XX`` (uppercase hex);
nothing else is escaped, so every other byte, UTF-8 or not, is the key's
own. ``urllib.parse.unquote`` is not the inverse: it decodes the result
as UTF-8, which changes a key whose bytes are not UTF-8. ``unescape``
works on bytes and refuses anything the mount would not write.
"""

import collections
import re

__all__ = ["OrderEntry", "OrderError", "unescape", "escape", "read_order",
           "parse_order"]

OrderEntry = collections.namedtuple("OrderEntry", "key record pad")
OrderEntry.__doc__ = """One position of a rank's list.

key: the object's key, bytes (unescaped); record: the record's index in
the object (a record view) or None (a file view); pad: True for a pad."""


class OrderError(ValueError):
    """An order file that is not what a shardfs mount writes."""


_ESC = re.compile(rb"%([0-9A-F]{2})")
_MUST = frozenset(range(0x20)) | {0x25}


def unescape(text):
    """The key bytes of an escaped key (bytes). Raises OrderError on a
    ``%`` not followed by two uppercase hex digits, or a raw byte below
    0x20 (both impossible in what the mount writes)."""
    for b in text:
        if b < 0x20:
            raise OrderError("raw byte 0x%02x in an escaped key" % b)
    out = _ESC.sub(lambda m: bytes((int(m.group(1), 16),)), text)
    # Every '%' of the text must have started an escape.
    if text.count(b"%") != len(_ESC.findall(text)):
        raise OrderError("'%%' not followed by two uppercase hex digits in %r"
                         % text)
    return out


def escape(key):
    """The escaped form of key bytes, as the manifest and order files
    write it."""
    return b"".join(b"%%%02X" % b if b in _MUST else bytes((b,))
                    for b in key)


def parse_order(data, name="order file"):
    """The entries of an order file's bytes. Raises OrderError naming
    ``name`` and the line on anything malformed, or on a file that mixes
    file-view and record-view lines."""
    if not data:
        return []
    if not data.endswith(b"\n"):
        raise OrderError("%s: the last line has no newline (cut short?)"
                         % name)
    out = []
    kind = None
    for n, line in enumerate(data[:-1].split(b"\n"), 1):
        fields = line.split(b"\t")
        pad = False
        if len(fields) > 1 and fields[-1] == b"pad":
            pad = True
            fields.pop()
        if len(fields) == 1:
            record = None
        elif len(fields) == 2 and re.fullmatch(rb"0|[1-9][0-9]*", fields[1]):
            record = int(fields[1])
        else:
            raise OrderError("%s:%d: not KEY[<TAB>RECORD][<TAB>pad]: %r"
                             % (name, n, line))
        if not fields[0]:
            raise OrderError("%s:%d: empty key" % (name, n))
        this = "file" if record is None else "record"
        if kind is None:
            kind = this
        elif kind != this:
            raise OrderError("%s:%d: a %s-view line in a %s view's order"
                             % (name, n, this, kind))
        try:
            key = unescape(fields[0])
        except OrderError as e:
            raise OrderError("%s:%d: %s" % (name, n, e)) from None
        out.append(OrderEntry(key, record, pad))
    return out


def read_order(path):
    """The entries of the order file at ``path`` (a list of OrderEntry)."""
    with open(path, "rb") as f:
        return parse_order(f.read(), str(path))
