"""Helpers for the storage tests: datasets made of real, deterministic files."""

from __future__ import annotations

import hashlib
import os


def payload(key: str, size: int) -> bytes:
    """Deterministic, incompressible-looking bytes that differ per key."""
    seed = key.encode()
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(seed + counter.to_bytes(8, "little")).digest()
        counter += 1
    return bytes(out[:size])


def make_basename_dataset(root: str, samples: int, size: int = 2000) -> dict[str, dict[str, bytes]]:
    """``root/part{0,1}/NNNN.bin`` + ``NNNN.cls`` pairs; returns key -> {field: bytes}."""
    expected: dict[str, dict[str, bytes]] = {}
    for i in range(samples):
        directory = os.path.join(root, f"part{i % 2}")
        os.makedirs(directory, exist_ok=True)
        key = f"part{i % 2}/{i:05d}"
        fields = {"bin": payload(key, size + i), "cls": str(i % 7).encode()}
        for ext, data in fields.items():
            with open(os.path.join(root, f"{key}.{ext}"), "wb") as fh:
                fh.write(data)
        expected[key] = fields
    return expected


def make_imagefolder(root: str, classes: list[str], per_class: int, size: int = 1500) -> dict[str, dict[str, bytes]]:
    """``root/<class>/img_N.jpg``; returns key -> {"jpg": bytes, "cls": index as ASCII}."""
    expected: dict[str, dict[str, bytes]] = {}
    for ci, name in enumerate(sorted(classes)):
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for i in range(per_class):
            key = f"{name}/img_{i}"
            data = payload(key, size + 37 * i)
            with open(os.path.join(root, f"{key}.jpg"), "wb") as fh:
                fh.write(data)
            expected[key] = {"jpg": data, "cls": str(ci).encode()}
    return expected


def tree_bytes(root: str, skip_broken: bool = False) -> dict[str, bytes]:
    """Every file under root: rel path -> bytes (dangling symlinks left out with ``skip_broken``)."""
    out: dict[str, bytes] = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            if skip_broken and not os.path.exists(path):
                continue
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = fh.read()
    return out


def pack_in_process(
    src: str, dst: str, fmt: str = "webdataset", shard_size: int = 1 << 20, seed: int | None = 0
) -> dict:
    """Pack without a child process (for setting up a test; the CLI is tested on its own)."""
    from supplyline.storage.pack.run import pack
    from supplyline.storage.pack.samples import plan_samples

    plan = plan_samples(src, "auto", seed)
    return pack(plan, dst, fmt, shard_size, False, seed, lambda n: None).manifest
