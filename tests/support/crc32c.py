"""CRC32C (Castagnoli) in plain Python, from its definition: the reference the tests hold the
X-Apus-Crc32C that Apus's object servers store (and the footer they check) against."""


def _table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c_hex(data):
    """8 lowercase hex digits, most significant first ("e3069283" for b"123456789")."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = (crc >> 8) ^ _TABLE[(crc ^ b) & 0xFF]
    return "%08x" % (crc ^ 0xFFFFFFFF)


assert crc32c_hex(b"123456789") == "e3069283"
