"""CRC-32C (Castagnoli), as TFRecord frames use it, and TFRecord's mask.

Pure Python, table driven (one table lookup per byte: about 10-20 MB/s).
If Debian's ``python3-crcmod`` is installed with its C extension, that is
used instead (hundreds of MB/s); both give the same values, which
``python/tests`` checks against the published check value of the
polynomial.
"""

__all__ = ["crc32c", "crc32c_python", "masked_crc32c", "ACCELERATED"]

_POLY = 0x82F63B78  # the Castagnoli polynomial, bit-reflected


def _table():
    t = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t.append(c)
    return tuple(t)


_TABLE = _table()


def crc32c_python(data, crc=0):
    """CRC-32C of ``data`` (bytes-like), continuing from ``crc``."""
    t = _TABLE
    crc ^= 0xFFFFFFFF
    for b in memoryview(data).cast("B"):
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _accelerated():
    try:
        import importlib
        # Debian: python3-crcmod. Its package's `crcmod` attribute is not
        # the crcmod.crcmod module: ask the module itself.
        impl = importlib.import_module("crcmod.crcmod")
        import crcmod.predefined
    except ImportError:
        return None
    # Only worth it with crcmod's C extension; its pure Python fallback is
    # no faster than the function above.
    if not getattr(impl, "_usingExtension", False):
        return None
    fn = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
    if fn(b"123456789") != 0xE3069283:
        return None
    return fn


_FAST = _accelerated()
ACCELERATED = _FAST is not None


def crc32c(data):
    """CRC-32C of ``data`` (bytes-like)."""
    if _FAST is not None:
        return _FAST(bytes(data) if not isinstance(data, bytes) else data)
    return crc32c_python(data)


def masked_crc32c(data):
    """TFRecord's masked CRC-32C: rotate right by 15, add 0xa282ead8."""
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
