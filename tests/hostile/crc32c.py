"""CRC-32C (Castagnoli, reflected), as safetensors.h stores it: for the hostile sweep's crafted
files (craft.py, gpt2_cases.sh), which must keep their checksums consistent where a check behind
them is the target."""

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


_CRC_CACHE = {}


def crc32c(data):
    """CRC-32C of `data`; results are cached, as most variants keep most tensors' bytes."""
    data = bytes(data)
    if data not in _CRC_CACHE:
        _CRC_CACHE[data] = _crc32c(data)
    return _CRC_CACHE[data]


def _crc32c(data):
    c = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the standard check value
