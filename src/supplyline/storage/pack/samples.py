"""Turn a directory of loose files into samples, the way webdataset names them.

A sample is the files that share a key: the path up to the first dot of the file name
(``train/0001.jpg`` + ``train/0001.cls`` -> key ``train/0001``, fields ``jpg`` and ``cls``) — the
same split webdataset's reader makes, so keys survive the round trip. In a class-per-folder layout
(ImageFolder: ``SRC/<class>/<file>``) each sample also gets a ``cls`` field holding the class index.
"""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import dataclass, field

from supplyline.errors import UserError
from supplyline.storage.files import Walk, walk

LABEL_FIELD = "cls"


@dataclass(frozen=True)
class Sample:
    key: str
    files: tuple[tuple[str, str], ...]  # (field name, absolute path), sorted by field
    label: int | None


@dataclass
class Plan:
    """The samples to pack, in the order they will be written."""

    source: str
    layout: str  # "basename" | "imagefolder"
    samples: list[Sample]
    classes: list[str]
    files: int
    total_bytes: int
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (rel path, reason)
    fingerprint: str = ""
    sizes: dict[str, int] = field(default_factory=dict, repr=False)  # path -> bytes


def plan_samples(src: str, layout: str = "auto", shuffle_seed: int | None = 0) -> Plan:
    """Group SRC's files into samples. ``shuffle_seed`` None keeps key order; a number shuffles
    deterministically (a class-per-folder dataset in key order would put one class per shard)."""
    if os.path.exists(src) and not os.path.isdir(src):
        raise UserError(f"{src} is a file; SRC must be a directory of samples")
    result = walk(src)
    if not result.files:
        extra = f"; {len(result.unreadable)} entries could not be read" if result.unreadable else ""
        raise UserError(f"{src} holds no files to pack{extra}")
    skipped = list(result.unreadable)
    grouped: dict[str, dict[str, str]] = {}
    sizes = {f.path: f.size for f in result.files}
    for f in result.files:
        directory, name = os.path.split(f.rel)
        stem, dot, ext = name.partition(".")
        if not stem:
            skipped.append((f.rel, "hidden file"))
            continue
        if not dot or not ext:
            skipped.append((f.rel, "no extension, so no field name"))
            continue
        key = f"{directory}/{stem}" if directory else stem
        grouped.setdefault(key, {})[ext] = f.path
    if not grouped:
        raise UserError(
            f"{src} holds no samples: no file has a name like KEY.EXT "
            f"({len(skipped)} skipped: hidden or without an extension)"
        )
    chosen = _choose_layout(layout, grouped)
    classes = sorted({k.split("/", 1)[0] for k in grouped}) if chosen == "imagefolder" else []
    index = {c: i for i, c in enumerate(classes)}
    samples = [
        Sample(key, tuple(sorted(fields.items())), index[key.split("/", 1)[0]] if classes else None)
        for key, fields in sorted(grouped.items())
    ]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(samples)
    used = [p for s in samples for _, p in s.files]
    plan = Plan(
        source=result.root,
        layout=chosen,
        samples=samples,
        classes=classes,
        files=len(used),
        total_bytes=sum(sizes[p] for p in used),
        skipped=sorted(skipped),
        sizes=sizes,
    )
    plan.fingerprint = _fingerprint(plan, result)
    return plan


def _choose_layout(layout: str, grouped: dict[str, dict[str, str]]) -> str:
    if layout in ("basename", "imagefolder"):
        if layout == "imagefolder" and any("/" not in k for k in grouped):
            raise UserError("--layout imagefolder needs every file inside a class folder (SRC/<class>/<file>)")
        return layout
    one_level = all(k.count("/") == 1 for k in grouped)
    class_dirs = {k.split("/", 1)[0] for k in grouped}
    has_labels = any(LABEL_FIELD in fields for fields in grouped.values())
    return "imagefolder" if one_level and len(class_dirs) >= 2 and not has_labels else "basename"


def _fingerprint(plan: Plan, result: Walk) -> str:
    """Identifies the source as packed: every file's path, size and modification time, and the
    order. A resumed pack must see the same fingerprint, or it would mix two different sources."""
    h = hashlib.sha256(f"{plan.layout}\0{','.join(plan.classes)}\0".encode())
    for sample in plan.samples:
        h.update(sample.key.encode() + b"\0")
        for name, path in sample.files:
            st = os.stat(path)
            h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def read_sample(sample: Sample) -> dict[str, object]:
    """The sample as webdataset writes it: ``__key__`` and one bytes value per field."""
    out: dict[str, object] = {"__key__": sample.key}
    for name, path in sample.files:
        with open(path, "rb") as fh:
            out[name] = fh.read()
    if sample.label is not None and LABEL_FIELD not in out:
        out[LABEL_FIELD] = str(sample.label).encode()
    return out


def estimated_bytes(plan: Plan, fmt: str) -> int:
    """About how much DST will hold: tar adds a 512-byte header and pads each member to 512 bytes;
    LMDB puts big values on 4 KiB overflow pages."""
    unit, header = (512, 512) if fmt == "webdataset" else (4096, 64)
    total = 0
    for sample in plan.samples:
        sizes = [plan.sizes[p] for _, p in sample.files] + ([4] if sample.label is not None else [])
        if fmt == "webdataset":
            total += sum(header + -(-s // unit) * unit for s in sizes)
        else:
            total += -(-(sum(sizes) + header * len(sizes)) // unit) * unit
    return total
