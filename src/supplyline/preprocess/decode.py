"""Image decoders available here, measured on the images the dataset itself opened.

``PIL.Image.open`` is wrapped while the dataset loads a few samples, keeping the bytes of each image
(from a path or a file object), so the comparison runs on the user's real files. Bytes are read
before timing so disk speed does not enter a decode comparison.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from supplyline.preprocess.report import DecodeReport, DecoderTiming


@contextmanager
def capture_images(limit: int = 16) -> Iterator[list[bytes]]:
    """Collect the bytes of up to ``limit`` images passed to ``PIL.Image.open`` inside the block."""
    from PIL import Image

    captured: list[bytes] = []
    original = Image.open

    def recording_open(fp: Any, *args: Any, **kwargs: Any) -> Any:
        if len(captured) < limit:
            data = _read_source(fp)
            if data:
                captured.append(data)
        return original(fp, *args, **kwargs)

    Image.open = recording_open
    try:
        yield captured
    finally:
        Image.open = original


def _read_source(fp: Any) -> bytes | None:
    try:
        if isinstance(fp, (str, bytes, os.PathLike)):
            with open(fp, "rb") as fh:
                return fh.read()
        if hasattr(fp, "read") and hasattr(fp, "seek") and hasattr(fp, "tell"):
            position = fp.tell()
            data = fp.read()
            fp.seek(position)
            return data
    except (OSError, ValueError):
        return None
    return None


def _decoders(sample: bytes) -> tuple[dict[str, Callable[[bytes], Any]], list[str]]:
    from PIL import Image

    found: dict[str, Callable[[bytes], Any]] = {"PIL": lambda b: Image.open(io.BytesIO(b)).convert("RGB")}
    missing: list[str] = []
    if sample[:3] == b"\xff\xd8\xff":  # JPEG: libjpeg can decode at 1/2, 1/4, 1/8 scale directly

        def draft(b: bytes) -> Any:
            image = Image.open(io.BytesIO(b))
            image.draft("RGB", (image.size[0] // 2, image.size[1] // 2))
            return image.convert("RGB")

        found["PIL draft (1/2 scale)"] = draft
    try:
        import cv2
        import numpy as np

        found["OpenCV"] = lambda b: cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR)
    except ImportError:
        missing.append("OpenCV (cv2 not installed)")
    try:
        import torch
        from torchvision.io import decode_image

        found["torchvision.io"] = lambda b: decode_image(torch.frombuffer(bytearray(b), dtype=torch.uint8))
    except Exception:  # not installed, or installed against another torch
        missing.append("torchvision.io (torchvision not importable)")
    return found, missing


def benchmark(images: list[bytes], min_seconds: float = 0.2) -> DecodeReport:
    """Milliseconds per image for each available decoder, over the same captured images."""
    decoders, missing = _decoders(images[0])
    timings: dict[str, float] = {}
    for name, decode in decoders.items():
        try:
            timings[name] = _time_decoder(decode, images, min_seconds)
        except Exception as exc:  # a decoder that cannot read these files is reported, not fatal
            missing.append(f"{name} (failed on these files: {type(exc).__name__})")
    base = timings.get("PIL", 0.0)
    ranked = sorted(timings.items(), key=lambda item: item[1])
    return DecodeReport(
        files=len(images),
        unavailable=missing,
        decoders=[DecoderTiming(name=n, ms_per_image=ms, speedup_vs_pil=base / ms if ms else 0.0) for n, ms in ranked],
    )


def _time_decoder(decode: Callable[[bytes], Any], images: list[bytes], min_seconds: float) -> float:
    decode(images[0])  # first call loads codec plugins
    done = 0
    start = time.perf_counter()
    while True:
        for data in images:
            decode(data)
        done += len(images)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds or done >= 2000:
            return elapsed * 1e3 / done
