"""Checkpoints as users write them: every save API hooked, nested saves folded, cadence computed."""

from __future__ import annotations

import os

import pytest
import torch

from supplyline.collect.checkpoints import cadence, describe, group_checkpoints
from supplyline.collect.steps import StepClock
from supplyline.collect.torch_hooks import Controller, TorchHooks


def _save(kind, start, duration, step, files=(), nbytes=None, in_step=True):
    return {
        "kind": kind,
        "start_s": start,
        "duration_s": duration,
        "target": files[0] if files else "",
        "in_step": in_step,
        "step": step,
        "files": list(files),
        "bytes": nbytes,
        "caller": f"train.py:{40 + step}:main",
    }


def test_saves_in_one_step_close_in_time_are_one_checkpoint():
    saves = []
    for k, step in enumerate((4, 9, 14, 19)):
        t = 10.0 * k
        saves.append(_save("torch.save", t, 0.8, step, ["m.pt"], 300_000_000))
        saves.append(_save("torch.save", t + 0.85, 0.4, step, ["o.pt"], 40_000_000))
    ckpts = group_checkpoints(saves)
    assert [c.step for c in ckpts] == [4, 9, 14, 19]
    assert all(c.saves == 2 and c.files == ["m.pt", "o.pt"] for c in ckpts)
    assert ckpts[0].bytes == 340_000_000 and ckpts[0].duration_s == pytest.approx(1.2)
    assert cadence(ckpts).sentence() == "4 checkpoints, every 5 steps, 340 MB each, 1.2 s each, 2 files each"


def test_saves_in_different_steps_or_far_apart_stay_apart():
    same_step_far = [_save("torch.save", 0.0, 0.1, 3), _save("torch.save", 5.0, 0.1, 3)]
    assert len(group_checkpoints(same_step_far)) == 2
    next_step_close = [_save("torch.save", 0.0, 0.1, 3), _save("torch.save", 0.2, 0.1, 4)]
    assert len(group_checkpoints(next_step_close)) == 2


def test_cadence_of_one_checkpoint_and_of_old_records():
    one = cadence(group_checkpoints([_save("safetensors.save_file", 1.0, 0.02, 7, ["w.safetensors"], 2_500)]))
    assert one.sentence() == "1 checkpoint, 2 kB each, 20 ms each"
    # records written before saves had a step: one checkpoint per save, no cadence claimed
    old = [
        {"kind": "torch.save", "start_s": float(i), "duration_s": 0.1, "target": "c.pt", "in_step": True}
        for i in range(3)
    ]
    c = cadence(group_checkpoints(old))
    assert c.checkpoints == 3 and c.every_steps is None and c.bytes_each is None


def test_describe_counts_only_saves_inside_steps_by_default():
    saves = [
        _save("torch.save", 0.0, 0.1, 1),
        _save("torch.save", 9.0, 0.1, 6),
        _save("torch.save", 99, 1, 6, in_step=False),
    ]
    assert describe(saves).startswith("2 checkpoints, every 5 steps")
    assert describe(saves, in_step_only=False).startswith("3 checkpoints")


@pytest.fixture
def hooks():
    clock = StepClock()
    h = TorchHooks(clock, Controller())
    h.install()
    clock._open(clock.t0)  # a step is open: saves land in_step
    yield h
    h.uninstall()


def _here(fn) -> str:
    return f"{os.path.abspath(__file__)}:{fn.__code__.co_firstlineno}"


def test_nested_hooked_saves_are_one_event_with_every_file(hooks, tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    model = torch.nn.Linear(64, 64)

    def trainer_like_checkpoint(folder):  # one outer call writing several files, like a Trainer
        os.makedirs(folder)
        safetensors_torch.save_model(model, os.path.join(folder, "model.safetensors"))
        torch.save({"lr": 0.1}, os.path.join(folder, "optimizer.pt"))
        with open(os.path.join(folder, "trainer_state.json"), "w") as fh:
            fh.write("{}")

    wrapped = hooks.save_recorder.wrapper("hf.trainer_checkpoint")(trainer_like_checkpoint)
    wrapped(str(tmp_path / "checkpoint-5"))
    assert len(hooks.saves) == 1, hooks.saves
    ev = hooks.saves[0]
    assert ev.kind == "hf.trainer_checkpoint" and ev.in_step and ev.step == 0
    assert ev.nested == ["safetensors.save_model", "safetensors.save_file", "torch.save"]
    assert [os.path.basename(f) for f in ev.files] == ["model.safetensors", "optimizer.pt", "trainer_state.json"]
    assert ev.bytes == sum(os.path.getsize(f) for f in ev.files) and ev.bytes > 64 * 64 * 4
    # the frame that called the checkpoint API: this test, on the line of the call
    assert ev.caller.startswith(os.path.abspath(__file__) + ":") and ev.caller.endswith(
        ":test_nested_hooked_saves_are_one_event_with_every_file"
    )
    assert ev.user_caller == ev.caller and ev.stack[0] == ev.caller


def test_plain_torch_save_records_file_bytes_and_the_calling_line(hooks, tmp_path):
    path = str(tmp_path / "ckpt.pt")
    torch.save(torch.zeros(1000), path)
    ev = hooks.saves[-1]
    assert (ev.kind, ev.target, ev.files, ev.bytes) == ("torch.save", path, [path], os.path.getsize(path))
    line = int(ev.caller.split(":")[-2])
    with open(__file__) as fh:
        assert "torch.save(torch.zeros(1000), path)" in fh.readlines()[line - 1]


def test_save_to_a_buffer_has_no_file_and_no_bytes(hooks):
    import io

    torch.save({"a": 1}, io.BytesIO())
    ev = hooks.saves[-1]
    assert ev.files == [] and ev.bytes is None


def test_saves_from_another_thread_are_not_the_training_threads(hooks, tmp_path):
    import threading

    t = threading.Thread(target=torch.save, args=({"a": 1}, str(tmp_path / "bg.pt")))
    t.start()
    t.join()
    assert hooks.saves == []


def test_framework_apis_are_hooked_once_imported(hooks):
    pytest.importorskip("transformers")
    from transformers import PreTrainedModel, Trainer

    hooks.maybe_patch_late()
    assert getattr(Trainer._save_checkpoint, "__wrapped__", None) is not None
    assert getattr(PreTrainedModel.save_pretrained, "__wrapped__", None) is not None
    hooks.uninstall()
    assert getattr(Trainer._save_checkpoint, "__wrapped__", None) is None


def test_helpers_take_the_records_typed_save_events_too():
    from supplyline.collect.events import SaveEvent

    events = [
        SaveEvent("torch.save", 10.0 * k, 0.5, "c.pt", True, step=5 * k + 4, files=["c.pt"], bytes=2_000_000)
        for k in range(3)
    ]
    assert describe(events) == "3 checkpoints, every 5 steps, 2.0 MB each, 500 ms each"
