"""Numbers for people, both ways: formatting what we print and parsing sizes people type
(``256MB``, ``1G``, ``64KiB``, ``4096``). One place so every command speaks the same units."""

from __future__ import annotations

import re

from supplyline.errors import UserError


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def human_duration(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{seconds / 60:.1f} min"


_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
}


def parse_size(text: str) -> int:
    """Bytes in ``text``; binary multiples (MB = MiB), as ``dd`` and ``fio`` read them."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise UserError(f"'{text}' is not a size (examples: 4096, 64KB, 256MB, 1G)")
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise UserError(f"'{text}' must be more than 0 bytes")
    return value
