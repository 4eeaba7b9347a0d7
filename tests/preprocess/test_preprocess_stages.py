"""Transform chains: discovery in each shape, per-stage timing and ranking, type churn, caching."""

from __future__ import annotations

import pytest

from supplyline.errors import UserError
from supplyline.preprocess.chain import churn


def test_planted_slow_stage_ranks_first_with_its_true_share(dsmod, quick):
    report = quick(dsmod.ThreeStages(), samples=25)
    chain = report.chain
    assert chain is not None and chain.kind == "compose" and chain.attribute == "transform.transforms"
    ranked = sorted(chain.stages, key=lambda s: s.share_of_sample, reverse=True)
    assert ranked[0].position == 1 and ranked[0].name == "Busy(6.0)"
    truth = dsmod.SLOW_MS / (dsmod.SLOW_MS + 2 * dsmod.FAST_MS)
    assert abs(ranked[0].share_of_sample - truth) < 0.04
    assert ranked[0].time.count == 25
    kinds = [s.kind for s in report.suggestions]
    assert "slow_stage" in kinds
    slow = next(s for s in report.suggestions if s.kind == "slow_stage")
    assert "Busy.__call__" in slow.where and f"{dsmod.__file__}:" in slow.where


def test_albumentations_style_chain_is_timed_through_keywords(dsmod, quick):
    report = quick(dsmod.AlbuStyle(), samples=10)
    stages = report.chain.stages
    assert [s.time.count for s in stages] == [10, 10]
    assert stages[1].share_of_sample > stages[0].share_of_sample * 3
    assert stages[0].input_kinds == {"numpy": 10}  # the image= keyword, seen through the dict


def test_chain_under_custom_attribute_needs_transform_attr(dsmod, quick):
    assert quick(dsmod.CustomAttr(), samples=6).chain is None
    report = quick(dsmod.CustomAttr(), samples=6, transform_attr="steps")
    assert report.chain.kind == "list"
    assert [s.name for s in report.chain.stages] == ["fast_step", "slow_step"]
    assert report.chain.stages[1].location.line > 0


def test_wrappers_are_removed_after_the_run(dsmod, quick):
    dataset = dsmod.ThreeStages()
    stages = list(dataset.transform.transforms)
    quick(dataset, samples=3)
    assert dataset.transform.transforms == stages


def test_unknown_transform_attr_is_one_clear_error(dsmod, quick):
    with pytest.raises(UserError, match="no attribute 'nope'"):
        quick(dsmod.ThreeStages(), transform_attr="nope")


def test_type_churn_counts_conversions_and_round_trips(dsmod, quick):
    report = quick(dsmod.Churn(), samples=10)
    assert report.chain.kind_path == ["pil", "numpy", "pil", "tensor"]
    assert report.chain.conversions_per_sample == 3
    assert report.chain.round_trips_per_sample == 1
    assert report.profile.conversions_per_sample["numpy->PIL (Image.fromarray)"] == pytest.approx(1.0)
    assert any(s.kind == "type_churn" for s in report.suggestions)


def test_churn_of_a_path():
    assert churn(("pil", "pil", "numpy", "tensor")) == (2, 0)
    assert churn(("numpy", "tensor", "numpy")) == (2, 1)
    assert churn(("int", "int")) == (0, 0)


def test_deterministic_prefix_is_offered_for_caching(dsmod, quick):
    report = quick(dsmod.DeterministicThenRandom(), samples=10)
    assert report.sample_deterministic is False
    assert report.chain.cacheable_prefix == ["Busy(3.0)"]
    assert [s.deterministic for s in report.chain.stages] == [True, False]
    cache = next(s for s in report.suggestions if s.kind == "cache")
    assert "Busy(3.0)" in cache.measured


def test_fully_deterministic_dataset_suggests_caching_getitem(dsmod, quick):
    report = quick(dsmod.ThreeStages(), samples=5)
    assert report.sample_deterministic is True
    cache = next(s for s in report.suggestions if s.kind == "cache")
    assert "ThreeStages.__getitem__" in cache.where
