"""The appliers' pieces on hand-built inputs, in this process."""

from __future__ import annotations

import json
import os

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler, TensorDataset

from supplyline.apply.loader import LoaderSettings, is_shuffled, rebuild_loader, settle
from supplyline.apply.spec import ApplySpec, parse_spec, spec_from_saved
from supplyline.errors import UserError

DATA = TensorDataset(torch.arange(40.0).unsqueeze(1))


def test_parse_spec_reads_values_flags_and_switches():
    spec = parse_spec("num_workers=6, prefetch_factor=4,persistent_workers,pin_memory=false,async_save")
    assert spec.loader == {"num_workers": 6, "prefetch_factor": 4, "persistent_workers": True, "pin_memory": False}
    assert spec.async_save and not spec.async_logging
    assert spec.describe() == "num_workers=6, prefetch_factor=4, persistent_workers, pin_memory=false, async_save"


@pytest.mark.parametrize("text", ["", "num_workers=-1", "prefetch_factor=0", "pin_memory=maybe", "auto,num_workers=2"])
def test_parse_spec_refuses_bad_text(text):
    with pytest.raises(UserError):
        parse_spec(text)


def test_spec_from_a_tune_result(tmp_path):
    path = tmp_path / "tune.json"
    rec = {"num_workers": 5, "prefetch_factor": 2, "persistent_workers": True, "pin_memory": False}
    path.write_text(json.dumps({"schema": "supplyline.tune/1", "recommended": rec}))
    spec = spec_from_saved(str(path))
    assert spec.loader == rec and spec.source == f"tune result {path}"


def test_spec_from_a_report_takes_only_changes_and_the_findings_switches(tmp_path):
    report = {
        "report_version": 1,
        "findings": [{"check": "logging"}, {"check": "checkpoint"}],
        "dataloader_recommended": {
            "num_workers": {"seen": 2, "recommended": 2},
            "prefetch_factor": {"seen": 2, "recommended": 2},
        },
    }
    (tmp_path / "report.json").write_text(json.dumps(report))
    spec = spec_from_saved(str(tmp_path))
    assert spec.loader == {} and spec.async_logging and spec.async_save


def test_spec_from_a_report_with_nothing_to_do_is_an_error(tmp_path):
    (tmp_path / "report.json").write_text(json.dumps({"report_version": 1, "findings": []}))
    with pytest.raises(UserError, match="recommends no change"):
        spec_from_saved(str(tmp_path))
    with pytest.raises(UserError, match=r"no report\.json"):
        spec_from_saved(str(tmp_path / "missing"))


def test_settle_drops_what_torch_refuses_without_workers():
    settled = settle({"num_workers": 2, "prefetch_factor": 4, "persistent_workers": True}, {"num_workers": 0})
    assert settled == {
        "num_workers": 0,
        "prefetch_factor": None,
        "persistent_workers": False,
        "multiprocessing_context": None,
    }
    assert settle({}, {"num_workers": 3, "prefetch_factor": 4})["prefetch_factor"] == 4


def test_is_shuffled():
    assert is_shuffled({"shuffle": True})
    assert is_shuffled({"sampler": RandomSampler(DATA)})
    assert is_shuffled({"batch_sampler": BatchSampler(RandomSampler(DATA), 4, False)})
    assert not is_shuffled({"sampler": SequentialSampler(DATA)})
    assert not is_shuffled({})


def test_loader_settings_change_training_loaders_and_come_off():
    original_init = DataLoader.__init__
    settings = LoaderSettings({"num_workers": 2, "prefetch_factor": 3, "persistent_workers": True}).install()
    try:
        first = DataLoader(DATA, batch_size=4)  # the only loader so far, unshuffled: training
        train = DataLoader(DATA, batch_size=4, shuffle=True)
        val = DataLoader(DATA, batch_size=4)  # unshuffled after a shuffled one: validation
    finally:
        settings.uninstall()
    assert DataLoader.__init__ is original_init
    assert (first.num_workers, first.prefetch_factor, first.persistent_workers) == (2, 3, True)
    assert train.num_workers == 2 and isinstance(train.sampler, RandomSampler)
    assert val.num_workers == 0 and val.prefetch_factor is None
    assert len(settings.changed) == 2 and settings.kept == 1
    assert "num_workers 0→2" in settings.summary()


def test_loader_settings_reach_subclasses_once_and_keep_the_users_objects():
    class Mine(DataLoader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)

    collate = lambda batch: batch  # noqa: E731
    generator = torch.Generator()
    settings = LoaderSettings({"num_workers": 1}, apply_to="train").install()
    try:
        loader = Mine(DATA, batch_size=4, shuffle=True, collate_fn=collate, generator=generator)
        sequential = DataLoader(DATA)
    finally:
        settings.uninstall()
    assert loader.num_workers == 1 and loader.collate_fn is collate and loader.generator is generator
    assert sequential.num_workers == 0  # 'train': shuffled loaders only
    assert len(settings.changed) == 1


def test_nested_installs_undo_in_order():
    outer = LoaderSettings({"num_workers": 1}, apply_to="all").install()
    inner = LoaderSettings({"prefetch_factor": 5}, apply_to="all").install()
    try:
        both = DataLoader(DATA, batch_size=4)
    finally:
        inner.uninstall()
    try:
        only_outer = DataLoader(DATA, batch_size=4)
    finally:
        outer.uninstall()
    assert (both.num_workers, both.prefetch_factor) == (1, 5)
    assert (only_outer.num_workers, only_outer.prefetch_factor) == (1, 2)
    assert DataLoader(DATA).num_workers == 0


def _init(worker_id: int) -> None:
    pass


def test_rebuild_loader_keeps_sampler_collate_and_worker_init():
    sampler = RandomSampler(DATA, generator=torch.Generator().manual_seed(3))
    old = DataLoader(DATA, batch_size=4, sampler=sampler, drop_last=True, worker_init_fn=_init)
    new = rebuild_loader(old, {"num_workers": 2, "prefetch_factor": 4})
    assert new.dataset is DATA and new.sampler is sampler and new.worker_init_fn is _init
    assert (new.batch_size, new.drop_last, new.num_workers, new.prefetch_factor) == (4, True, 2, 4)
    batches = list(new)
    assert len(batches) == 10 and sorted(torch.cat([b[0] for b in batches]).flatten().tolist()) == list(
        map(float, range(40))
    )


def test_rebuild_loader_with_a_users_batch_sampler_and_without_batching():
    batches = BatchSampler(SequentialSampler(DATA), 8, drop_last=False)
    rebuilt = rebuild_loader(DataLoader(DATA, batch_sampler=batches), {"num_workers": 0})
    assert rebuilt.batch_sampler is batches and len(list(rebuilt)) == 5
    unbatched = rebuild_loader(DataLoader(DATA, batch_size=None), {"num_workers": 0, "pin_memory": False})
    assert unbatched.batch_size is None and len(list(unbatched)) == 40


def test_apply_spec_describe_empty():
    assert ApplySpec().empty() and ApplySpec().describe() == "nothing"
    assert os.path.basename(__file__).startswith("test_")


def _report_with_trials(tmp_path, *trials):
    report = {
        "report_version": 1,
        "findings": [{"check": "dataloader"}, {"check": "checkpoint"}],
        "dataloader_recommended": {"num_workers": {"seen": 0, "recommended": 2}},
        "trials": list(trials),
    }
    (tmp_path / "report.json").write_text(json.dumps(report))
    return str(tmp_path)


def test_auto_applies_only_what_its_trial_measured_faster(tmp_path):
    faster = {"fix": "dataloader", "settings": {"num_workers": 3}, "measured_speedup": 1.3, "spread": [1.1, 1.5]}
    slower = {"fix": "checkpoint", "settings": {"async_save": True}, "measured_speedup": 0.8, "spread": [0.7, 0.9]}
    spec = spec_from_saved(_report_with_trials(tmp_path, faster, slower))
    assert spec.loader == {"num_workers": 3} and not spec.async_save


def test_auto_keeps_away_from_a_loader_the_trial_found_no_faster(tmp_path):
    # dcgan's case: the table said 2 workers, the trial measured 0.88× (0.84–0.93): nothing to apply.
    slower = {"fix": "dataloader", "settings": {"num_workers": 2}, "measured_speedup": 0.88, "spread": [0.84, 0.93]}
    unclear = {"fix": "checkpoint", "settings": {"async_save": True}, "measured_speedup": 1.1, "spread": [0.9, 1.3]}
    with pytest.raises(
        UserError, match=r"dataloader trial measured 0\.88×: slower.*checkpoint trial measured 1\.10×: no"
    ):
        spec_from_saved(_report_with_trials(tmp_path, slower, unclear))


def test_trial_decision_reads_the_interval():
    from supplyline.analyze.trial_result import trial_decision

    assert trial_decision(1.2, [1.05, 1.4]) == "faster"
    assert trial_decision(0.9, [0.84, 0.97]) == "slower"
    assert trial_decision(1.2, [0.95, 1.4]) == "no difference"
    # real but too small to act on: inside the 5% band the interval's side does not decide
    assert trial_decision(0.96, [0.93, 0.99]) == "no difference"
    assert trial_decision(1.03, [1.01, 1.06]) == "no difference"
    assert trial_decision(None, [1.1, 1.2]) is None
    assert trial_decision(1.2, None) == "faster" and trial_decision(1.01, []) == "no difference"  # older records
