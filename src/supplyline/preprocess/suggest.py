"""Suggestions keyed to what was measured: each names a function and line and the number behind it.

Pure functions of the report (plus the dataset's ``__getitem__`` location), so they can be re-derived
from a saved report and tested without running anything.
"""

from __future__ import annotations

from supplyline.preprocess.profiling import is_library_file
from supplyline.preprocess.report import Location, PreprocessReport, StageTiming, Suggestion
from supplyline.units import human_bytes

LOOP_MIN_SHARE = 0.10  # a loop must hold this share of sampled time to be worth vectorizing
LOOP_MIN_SELF_SHARE = 0.05  # ...and its function must spend this share in the interpreter itself
STAGE_MIN_SHARE = 0.25
CACHE_MIN_SHARE = 0.20
DECODE_MIN_SHARE = 0.10
IO_MAX_CPU_SHARE = 0.5
TRANSFER_MIN_SHARE = 0.2
CHURN_MIN_CONVERSIONS = 3


def suggest(report: PreprocessReport, getitem: Location | None) -> list[Suggestion]:
    where_getitem = str(getitem) if getitem else "__getitem__"
    found: list[Suggestion] = []
    for rule in (_errors, _python_loops, _slow_stage, _decode, _cache, _gil, _churn, _io_wait, _transfer, _outliers):
        found.extend(rule(report, where_getitem))
    return found


def _errors(r: PreprocessReport, where: str) -> list[Suggestion]:
    if not r.errors:
        return []
    first = r.errors[0]
    indices = ", ".join(str(e.index) for e in r.errors[:10]) + (" ..." if len(r.errors) > 10 else "")
    measured = len(r.errors) + (r.getitem.count if r.getitem else 0)
    return [
        Suggestion(
            "error",
            str(first.location or where),
            f"{len(r.errors)} of {measured} samples raised (indices {indices}); first: {first.error}",
            "fix the dataset at these indices or filter them out; a raising sample kills "
            "the DataLoader mid-epoch (tracebacks are in the report)",
        )
    ]


def _python_loops(r: PreprocessReport, where: str) -> list[Suggestion]:
    if not r.lines:
        return []
    loops: dict[tuple[str, int], list] = {}
    for hot in r.lines.lines:
        if hot.in_python_loop and hot.loop_line and not is_library_file(hot.location.file):
            loops.setdefault((hot.location.file, hot.loop_line), []).append(hot)
    found = []
    for (file, loop_line), hots in loops.items():
        share = sum(h.share for h in hots)
        self_share = max((h.function_self_share or 0.0) for h in hots)
        if share < LOOP_MIN_SHARE or self_share < LOOP_MIN_SELF_SHARE:
            continue
        hottest = max(hots, key=lambda h: h.share)
        found.append(
            Suggestion(
                "python_loop",
                f"{hottest.location.function} ({file}:{loop_line})",
                f"{share:.0%} of sampled time is inside the Python loop at line {loop_line} (hottest: line "
                f"{hottest.location.line} `{hottest.source}`); {self_share:.0%} of profiled time runs in the interpreter "
                f"in {hottest.location.function}",
                "vectorize: replace the per-element (per-pixel) loop with NumPy/PyTorch array operations on the "
                "whole array (e.g. `(img - mean) / std`, `np.clip`, `np.where`, lookup tables via indexing)",
            )
        )
    return found


def _slow_stage(r: PreprocessReport, where: str) -> list[Suggestion]:
    if not r.chain or not r.chain.stages:
        return []
    ranked = sorted(r.chain.stages, key=lambda s: s.share_of_sample, reverse=True)
    top = ranked[0]
    if top.share_of_sample < STAGE_MIN_SHARE:
        return []
    runner_up = f"; next: {ranked[1].name} {ranked[1].share_of_sample:.0%}" if len(ranked) > 1 else ""
    return [
        Suggestion(
            "slow_stage",
            _stage_where(top),
            f"stage {top.position + 1} of {len(ranked)} takes {top.share_of_sample:.0%} of each sample "
            f"(median {top.time.median_ms:.2f} ms){runner_up}",
            f"optimize this stage first; every other stage together can win at most {1 - top.share_of_sample:.0%}",
        )
    ]


def _stage_where(stage: StageTiming) -> str:
    """``Location`` text, prefixed with the stage's name when that is not just its function's."""
    if stage.location is None:
        return f"{stage.name} (location unknown)"
    if stage.location.function.split(".")[0] == stage.name.split("(")[0]:
        return str(stage.location)
    return f"{stage.name}: {stage.location}"


def _decode(r: PreprocessReport, where: str) -> list[Suggestion]:
    if not r.profile or r.profile.decode_share < DECODE_MIN_SHARE:
        return []
    site = str(r.profile.decode_sites[0]) if r.profile.decode_sites else where
    measured = f"image decoding is {r.profile.decode_share:.0%} of __getitem__ time"
    action = "decode fewer bytes: store images pre-resized, or decode at reduced size"
    if r.decode and r.decode.decoders:
        timings = ", ".join(f"{d.name} {d.ms_per_image:.2f} ms (×{d.speedup_vs_pil:.2f})" for d in r.decode.decoders)
        measured += f"; on {r.decode.files} of your files: {timings}"
        best = r.decode.decoders[0]
        if best.name != "PIL" and best.speedup_vs_pil > 1.1:
            action = f"switch to {best.name} (×{best.speedup_vs_pil:.2f} on your files)"
            if "draft" in best.name:
                action += " when you resize down afterwards anyway: `img.draft('RGB', (w // 2, h // 2))` before convert"
        if r.decode.unavailable:
            action += f"; not available here: {', '.join(r.decode.unavailable)}"
    return [Suggestion("decode", site, measured, action)]


def _cache(r: PreprocessReport, where: str) -> list[Suggestion]:
    if r.sample_deterministic and r.getitem and r.getitem.count:
        return [
            Suggestion(
                "cache",
                where,
                f"dataset[i] returned identical output twice for every checked index; each epoch repeats "
                f"{r.getitem.median_ms:.2f} ms per sample",
                "deterministic work repeated every epoch: compute it once and cache it (in memory if it "
                "fits, or write the prepared samples to disk, e.g. with `supplyline pack`)",
            )
        ]
    if r.chain and r.chain.cacheable_prefix and r.chain.cacheable_share >= CACHE_MIN_SHARE:
        first = r.chain.stages[0]
        return [
            Suggestion(
                "cache",
                _stage_where(first),
                f"the leading stages {', '.join(r.chain.cacheable_prefix)} are deterministic (same input, "
                f"same output) and take {r.chain.cacheable_share:.0%} of each sample",
                "apply them once and store the result; keep only the random stages in the loader",
            )
        ]
    return []


def _gil(r: PreprocessReport, where: str) -> list[Suggestion]:
    if not r.gil or not r.gil.holds_gil:
        return []
    hot = next((h for h in (r.profile.top if r.profile else []) if not is_library_file(h.location.file)), None)
    return [
        Suggestion(
            "gil",
            str(hot.location) if hot else where,
            r.gil.verdict,
            "keep this work in DataLoader worker processes (num_workers ≥ cores), never in threads; "
            "or move it into vectorized/native code that releases the GIL",
        )
    ]


def _churn(r: PreprocessReport, where: str) -> list[Suggestion]:
    chain_conversions = r.chain.conversions_per_sample if r.chain else 0.0
    sites = r.profile.conversion_sites if r.profile else []
    round_trips = max(r.chain.round_trips_per_sample if r.chain else 0.0, _profile_round_trips(r))
    total = max(chain_conversions, sum(r.profile.conversions_per_sample.values()) if r.profile else 0.0)
    if round_trips < 1 and total < CHURN_MIN_CONVERSIONS:
        return []
    # Point at a conversion back to PIL (the usual round trip) if a user function makes one.
    site = next((s for s in sites if "->PIL" in s.label), sites[0] if sites else None)
    spot = str(site.caller) if site else where
    path = f"each sample goes {' -> '.join(r.chain.kind_path)} through the chain; " if r.chain else ""
    counts = r.profile.conversions_per_sample if r.profile else {}
    calls = ", ".join(f"{label} {n:.1f}x" for label, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return [
        Suggestion(
            "type_churn",
            spot,
            f"{path}{total:.1f} conversions per sample ({calls or 'between stages'}), "
            f"{round_trips:.1f} round trips (converted back to a kind it already had)",
            "keep one representation through the chain (e.g. decode straight to a uint8 array or tensor "
            "and use array ops for every stage); convert once at the end",
        )
    ]


def _profile_round_trips(r: PreprocessReport) -> float:
    """Conversions undone in the same sample (there and back), from the profile's conversion counts."""
    if not r.profile:
        return 0.0
    per_direction: dict[tuple[str, str], float] = {}
    for label, n in r.profile.conversions_per_sample.items():
        source, _, rest = label.partition("->")
        key = (source or "any", rest.split(" ")[0])
        per_direction[key] = per_direction.get(key, 0.0) + n
    return sum(min(n, per_direction.get((dst, src), 0.0)) for (src, dst), n in per_direction.items()) / 2


def _io_wait(r: PreprocessReport, where: str) -> list[Suggestion]:
    if r.cpu_share is None or r.cpu_share >= IO_MAX_CPU_SHARE or not r.getitem:
        return []
    return [
        Suggestion(
            "io_wait",
            where,
            f"only {r.cpu_share:.0%} of __getitem__ wall time is CPU; the rest waits (disk, network, sleep)",
            "waiting work overlaps well: try more workers than cores, and check the storage with `supplyline disk`",
        )
    ]


def _transfer(r: PreprocessReport, where: str) -> list[Suggestion]:
    if not r.transfer or not r.getitem or r.transfer.transfer_ms_per_batch <= 0:
        return []
    produce_ms = r.getitem.median_ms * r.transfer.batch_size + (r.collate.median_ms if r.collate else 0.0)
    share = r.transfer.transfer_ms_per_batch / (produce_ms + r.transfer.transfer_ms_per_batch)
    if share < TRANSFER_MIN_SHARE:
        return []
    size = human_bytes(r.transfer.tensor_bytes or r.transfer.pickled_bytes)
    return [
        Suggestion(
            "transfer",
            where,
            f"handing a {size} batch from a worker to the trainer takes {r.transfer.transfer_ms_per_batch:.2f} "
            f"ms, {share:.0%} of producing it",
            "send smaller batches across: uint8 instead of float32 (normalize on the GPU), "
            "no duplicate copies of the same data in the sample",
        )
    ]


def _outliers(r: PreprocessReport, where: str) -> list[Suggestion]:
    d = r.getitem
    if not d or d.count < 10 or d.median_ms <= 0 or d.max_ms < 10 * d.median_ms:
        return []
    slow = ", ".join(f"{i} ({ms:.1f} ms)" for i, ms in d.slowest[:3])
    return [
        Suggestion(
            "outliers",
            where,
            f"slowest samples {slow} vs median {d.median_ms:.2f} ms",
            "look at these indices: oversized files, a first-call lazy initialization, or a slow "
            "path in the code; a worker stuck on one delays its whole batch",
        )
    ]
