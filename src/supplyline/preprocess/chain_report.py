"""Turn what the stage proxies recorded into a ``ChainReport``: ranking, shares, churn, cacheable prefix."""

from __future__ import annotations

from supplyline.preprocess.chain import InstalledChain, churn, locate, stage_name
from supplyline.preprocess.report import ChainReport, Distribution, StageTiming


def _typical_share(stage_ms: list[float], getitem_ms: list[float]) -> float:
    """Median of per-sample shares: a sample slowed by the OS (preempted) cannot skew the ranking.

    Falls back to the ratio of totals when the stage did not run once per sample (conditional stages).
    """
    if len(stage_ms) != len(getitem_ms) or not stage_ms:
        total = sum(getitem_ms)
        return sum(stage_ms) / total if total > 0 else 0.0
    shares = sorted(s / g for s, g in zip(stage_ms, getitem_ms) if g > 0)
    return (
        shares[len(shares) // 2] if len(shares) % 2 else (shares[len(shares) // 2 - 1] + shares[len(shares) // 2]) / 2
    )


def build(
    chain: InstalledChain, getitem_own_ms: list[float], getitem_wall_ms: list[float], sample_indices: list[int]
) -> ChainReport:
    """Per committed sample, in order: own and wall ``__getitem__`` times, and the index (labels the slowest).

    Shares use own times (wall minus waiting for a CPU) so a busy machine does not inflate long stages.
    """
    recorder = chain.recorder
    wall_total_ms = sum(getitem_wall_ms)
    stages = []
    for position, stage in enumerate(chain.stages):
        times = recorder.times_ms[position]
        checks = recorder.same_twice[position]
        stages.append(
            StageTiming(
                position=position,
                name=stage_name(stage),
                location=locate(stage),
                time=Distribution.of(times, sample_indices[: len(times)]),
                share_of_sample=_typical_share(times, getitem_own_ms),
                share_of_total=sum(recorder.wall_ms[position]) / wall_total_ms if wall_total_ms > 0 else 0.0,
                input_kinds=dict(recorder.in_kinds[position]),
                output_kinds=dict(recorder.out_kinds[position]),
                deterministic=all(checks) if checks else None,
            )
        )
    samples = sum(recorder.paths.values())
    conversions = round_trips = 0
    for path, count in recorder.paths.items():
        c, r = churn(path)
        conversions += c * count
        round_trips += r * count
    prefix = []
    for stage in stages:
        if stage.deterministic is not True:
            break
        prefix.append(stage)
    common = recorder.paths.most_common(1)
    return ChainReport(
        attribute=chain.attribute,
        kind=chain.kind,
        stages=stages,
        kind_path=list(common[0][0]) if common else [],
        conversions_per_sample=conversions / samples if samples else 0.0,
        round_trips_per_sample=round_trips / samples if samples else 0.0,
        cacheable_prefix=[s.name for s in prefix],
        cacheable_share=sum(s.share_of_sample for s in prefix),
    )
