"""Turn what the stage proxies recorded into a ``ChainReport``: ranking, shares, churn, cacheable prefix."""
from __future__ import annotations

from supplyline.experiments.preprocess.chain import InstalledChain, churn, locate, stage_name
from supplyline.experiments.preprocess.report import ChainReport, Distribution, StageTiming


def build(chain: InstalledChain, getitem_total_ms: float, sample_indices: list[int]) -> ChainReport:
    """``sample_indices``: the dataset index of each committed sample, in order (labels the slowest)."""
    recorder = chain.recorder
    stages = []
    for position, stage in enumerate(chain.stages):
        times = recorder.times_ms[position]
        checks = recorder.same_twice[position]
        stages.append(StageTiming(
            position=position, name=stage_name(stage), location=locate(stage), time=Distribution.of(times, sample_indices[:len(times)]),
            share_of_sample=sum(times) / getitem_total_ms if getitem_total_ms > 0 else 0.0,
            input_kinds=dict(recorder.in_kinds[position]), output_kinds=dict(recorder.out_kinds[position]),
            deterministic=all(checks) if checks else None))
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
    return ChainReport(attribute=chain.attribute, kind=chain.kind, stages=stages,
                       kind_path=list(common[0][0]) if common else [],
                       conversions_per_sample=conversions / samples if samples else 0.0,
                       round_trips_per_sample=round_trips / samples if samples else 0.0,
                       cacheable_prefix=[s.name for s in prefix],
                       cacheable_share=sum(s.share_of_sample for s in prefix))
