"""How one sample is stored in an LMDB value, and the checksum of a sample's content.

Both ``supplyline pack`` (writing) and the datasets (reading) use these, so the two can never
disagree. A sample is a dict: ``"__key__"`` -> str, and one entry per field (file extension such as
``"jpg"`` or ``"cls"``) -> bytes, exactly as they were on disk.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping

_HEADER_LEN = struct.Struct("<I")
EMPTY_CHAIN = b"\0" * 32


def fields_of(sample: Mapping[str, object]) -> dict[str, bytes]:
    """The data fields of a sample: everything except ``__key__``-style metadata."""
    return {k: _bytes(k, v) for k, v in sample.items() if not k.startswith("__")}


def _bytes(key: str, value: object) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"sample field {key!r} must be bytes, not {type(value).__name__}")


def encode_record(sample: Mapping[str, object]) -> bytes:
    """``<u32 header length><JSON header: key and field sizes><field bytes...>`` — no pickle, so
    reading a dataset never runs code from it."""
    fields = fields_of(sample)
    names = sorted(fields)
    header = json.dumps(
        {"key": sample["__key__"], "fields": [[n, len(fields[n])] for n in names]}, separators=(",", ":")
    ).encode()
    return b"".join([_HEADER_LEN.pack(len(header)), header, *(fields[n] for n in names)])


def decode_record(value: bytes) -> dict[str, object]:
    (header_len,) = _HEADER_LEN.unpack_from(value, 0)
    start = _HEADER_LEN.size
    header = json.loads(bytes(value[start : start + header_len]))
    sample: dict[str, object] = {"__key__": header["key"]}
    offset = start + header_len
    for name, size in header["fields"]:
        sample[name] = bytes(value[offset : offset + size])
        offset += size
    return sample


def sample_digest(sample: Mapping[str, object]) -> bytes:
    """SHA-256 over the key and every field's name, length and bytes, in sorted field order."""
    h = hashlib.sha256(str(sample["__key__"]).encode())
    fields = fields_of(sample)
    for name in sorted(fields):
        h.update(b"\0" + name.encode() + b"\0" + len(fields[name]).to_bytes(8, "little"))
        h.update(fields[name])
    return h.digest()


def chain(previous: bytes, digest: bytes) -> bytes:
    """Fold one more digest into a running checksum. A chain (rather than one hash object) can be
    saved as 32 bytes and continued after an interruption."""
    return hashlib.sha256(previous + digest).digest()
