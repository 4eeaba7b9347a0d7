"""cProfile of ``__getitem__``: the .prof file snakeviz opens, a text top-N, and what it reveals.

Stats are handled as pstats' raw dict ``{(file, line, function): (prim_calls, calls, self_s,
cumulative_s, callers)}`` so main-process and worker profiles go through the same code.
"""

from __future__ import annotations

import cProfile
import marshal
import os
import pstats
from collections.abc import Callable
from typing import Any

from supplyline.atomic import atomic_write_bytes
from supplyline.preprocess.report import ConversionSite, HotFunction, Location, ProfileReport

RawStats = dict[tuple[str, int, str], tuple[Any, ...]]

# (label, matcher on the pstats key) for calls that turn one kind of sample into another.
CONVERSIONS: list[tuple[str, Callable[[str, str], bool]]] = [
    (
        "PIL->numpy (np.asarray(image))",
        lambda f, n: f.endswith(os.path.join("PIL", "Image.py")) and n == "_conv_type_shape",
    ),
    ("numpy->PIL (Image.fromarray)", lambda f, n: f.endswith(os.path.join("PIL", "Image.py")) and n == "fromarray"),
    ("numpy->tensor (torch.from_numpy)", lambda f, n: n == "<built-in method torch.from_numpy>"),
    ("->tensor (torch.as_tensor)", lambda f, n: n == "<built-in method torch.as_tensor>"),
    ("->tensor (torch.tensor)", lambda f, n: n == "<built-in method torch.tensor>"),
    ("tensor->numpy (Tensor.numpy)", lambda f, n: n.startswith("<method 'numpy' of 'torch.")),
    ("PIL->tensor (torchvision to_tensor)", lambda f, n: "torchvision" in f and n in ("to_tensor", "pil_to_tensor")),
    ("tensor->PIL (torchvision to_pil_image)", lambda f, n: "torchvision" in f and n == "to_pil_image"),
]

# Calls whose cumulative time is image decoding.
DECODERS: list[Callable[[str, str], bool]] = [
    lambda f, n: f.endswith(os.path.join("PIL", "ImageFile.py")) and n == "load",
    lambda f, n: n.startswith("<built-in method cv2.imread") or n.startswith("<built-in method cv2.imdecode"),
    lambda f, n: "torchvision" in f and n in ("decode_jpeg", "decode_png", "decode_image", "read_image"),
]


def profile_calls(
    call: Callable[[int], Any], indices: list[int], after: Callable[[], None] | None = None
) -> tuple[RawStats, int]:
    """Run ``call(i)`` for each index under cProfile; errors are skipped (the timing pass reports them).

    ``after`` (progress) runs outside the profiled region so it does not show in the profile."""
    profiler = cProfile.Profile()
    done = 0
    try:
        for index in indices:
            profiler.enable()
            try:
                call(index)
                done += 1
            except Exception:
                pass
            finally:
                profiler.disable()
            if after:
                after()
    finally:
        profiler.create_stats()
    return dict(profiler.stats), done


def total_seconds(stats: RawStats) -> float:
    return sum(entry[2] for entry in stats.values())


def write_prof(path: str, stats: RawStats) -> None:
    """Write stats in the format pstats/snakeviz read (what ``Stats.dump_stats`` writes), atomically."""
    atomic_write_bytes(path, marshal.dumps(stats))


def merge(paths: list[str]) -> RawStats:
    """Merge several .prof files with pstats (as one does for per-worker profiles)."""
    merged = pstats.Stats(paths[0])
    for path in paths[1:]:
        merged.add(path)
    return dict(merged.stats)  # type: ignore[attr-defined]  # pstats.Stats.stats: real, not in typeshed


def pretty_file(filename: str) -> str:
    """Shorten site-packages and stdlib paths; keep the user's own paths as they are."""
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def top_functions(stats: RawStats, samples: int, n: int = 15) -> list[HotFunction]:
    """The n functions with the most self time, per sample."""
    total = total_seconds(stats) or 1e-12
    per = max(samples, 1)
    ranked = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:n]
    return [
        HotFunction(
            location=Location(file=pretty_file(f), line=line, function=name),
            calls=int(entry[1]),
            self_ms_per_sample=entry[2] * 1e3 / per,
            cumulative_ms_per_sample=entry[3] * 1e3 / per,
            self_share=entry[2] / total,
        )
        for (f, line, name), entry in ranked
    ]


def conversion_counts(stats: RawStats, samples: int) -> dict[str, float]:
    """Calls per sample of each numpy / PIL / tensor conversion seen anywhere under ``__getitem__``."""
    counts: dict[str, float] = {}
    for (f, _line, name), entry in stats.items():
        for label, matches in CONVERSIONS:
            if matches(f, name):
                counts[label] = counts.get(label, 0.0) + entry[1] / max(samples, 1)
    return counts


def conversion_sites(stats: RawStats, samples: int) -> list[ConversionSite]:
    """User functions that call a conversion, with calls per sample (from pstats' caller records)."""
    sites: list[ConversionSite] = []
    for (f, _line, name), entry in stats.items():
        label = next((label for label, matches in CONVERSIONS if matches(f, name)), None)
        if label is None:
            continue
        for (cf, cl, cn), caller_entry in entry[4].items():
            if not is_library_file(cf):
                calls = caller_entry[1] if isinstance(caller_entry, tuple) else caller_entry
                sites.append(
                    ConversionSite(
                        label=label,
                        caller=Location(file=cf, line=cl, function=cn),
                        calls_per_sample=calls / max(samples, 1),
                    )
                )
    return sorted(sites, key=lambda s: s.calls_per_sample, reverse=True)


def decode_seconds(stats: RawStats) -> float:
    return sum(entry[3] for (f, _l, n), entry in stats.items() if any(m(f, n) for m in DECODERS))


def decode_sites(stats: RawStats) -> list[Location]:
    """User functions that opened images (callers of ``PIL.Image.open``, cv2/torchvision decoders)."""
    sites: list[Location] = []
    for (f, _l, n), entry in stats.items():
        opener = (f.endswith(os.path.join("PIL", "Image.py")) and n == "open") or any(m(f, n) for m in DECODERS[1:])
        if not opener:
            continue
        for cf, cl, cn in entry[4]:
            location = Location(file=cf, line=cl, function=cn)
            if not is_library_file(cf) and location not in sites:
                sites.append(location)
    return sites


def is_library_file(filename: str) -> bool:
    """Third-party, stdlib or supplyline's own code: not where a user would change anything."""
    import sysconfig

    if "site-packages" in filename or "dist-packages" in filename or filename.startswith(("<", "~")):
        return True
    own = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    stdlib = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
    return filename.startswith(own) or any(filename.startswith(p) for p in stdlib)


def self_share_of(stats: RawStats, file: str, first_line: int) -> float | None:
    """Self-time share of the function starting at ``file:first_line`` (its time in the interpreter)."""
    total = total_seconds(stats)
    for (f, line, _name), entry in stats.items():
        if line == first_line and f == file and total > 0:
            return entry[2] / total
    return None


def function_mean_ms(stats: RawStats, function: str) -> tuple[int, float]:
    """(calls, mean cumulative ms) of every function named ``function`` (e.g. ``__getitem__``)."""
    calls = 0
    seconds = 0.0
    for (_f, _line, name), entry in stats.items():
        if name == function:
            calls += int(entry[1])
            seconds += entry[3]
    return calls, (seconds * 1e3 / calls if calls else 0.0)


def build_report(stats: RawStats, samples: int, prof_path: str | None) -> ProfileReport:
    total = total_seconds(stats)
    return ProfileReport(
        samples=samples,
        total_ms=total * 1e3,
        top=top_functions(stats, samples),
        prof_path=prof_path,
        conversions_per_sample=conversion_counts(stats, samples),
        decode_share=(decode_seconds(stats) / total) if total > 0 else 0.0,
        decode_sites=decode_sites(stats),
        conversion_sites=conversion_sites(stats, samples),
    )
