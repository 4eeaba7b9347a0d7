"""AsyncCheckpointer in one process: consistency of the snapshot, policies, triggers, pruning."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from supplyline.errors import UserError
from supplyline.fixes import AsyncCheckpointer, load_latest


class Gate:
    """Pickling blocks until the test opens the gate: holds a save in flight, deterministically.

    torch.save pickles the whole structure before it writes any tensor bytes, so while the gate
    is closed none of the state has reached the file yet."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def __deepcopy__(self, memo: dict) -> Gate:
        return self  # the snapshot must keep the same gate

    def __reduce__(self):
        self.entered.set()
        self.opened.wait(timeout=60)
        return (str, ("gate",))


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))


def _train_steps(model: torch.nn.Module, optimizer: torch.optim.Optimizer, n: int) -> None:
    for _ in range(n):
        loss = model(torch.randn(32, 256)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@pytest.mark.slow
def test_saved_state_is_the_state_at_the_call_while_training_goes_on(scratch):
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _train_steps(model, optimizer, 2)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    gate = Gate()
    with AsyncCheckpointer(scratch) as ckpt:
        ckpt.save({"model": model.state_dict(), "optim": optimizer.state_dict(), "gate": gate}, step=2)
        assert gate.entered.wait(timeout=60)
        _train_steps(model, optimizer, 3)  # in-place updates while the save is in flight
        gate.opened.set()
    loaded = load_latest(scratch, weights_only=False)
    assert loaded is not None and loaded.step == 2
    for key, value in expected.items():
        assert torch.equal(loaded.state["model"][key], value), key
        assert not torch.equal(model.state_dict()[key], value), key  # training did move on
    assert set(loaded.state["optim"]["state"]) == set(optimizer.state_dict()["state"])


def test_tied_weights_stay_tied_in_the_snapshot(scratch):
    shared = torch.randn(64, 64)
    with AsyncCheckpointer(scratch) as ckpt:
        ckpt.save({"a": shared, "b": shared.view(64, 64)}, step=1)
    state = load_latest(scratch).state
    assert state["a"].untyped_storage().data_ptr() == state["b"].untyped_storage().data_ptr()


def test_policy_skip_drops_a_save_while_one_is_in_flight(scratch):
    gate = Gate()
    with AsyncCheckpointer(scratch, policy="skip") as ckpt:
        assert ckpt.save({"gate": gate}, step=1)
        assert gate.entered.wait(timeout=60)
        assert ckpt.save({"w": torch.ones(3)}, step=2) is False
        assert ckpt.saves_skipped == 1
        gate.opened.set()
    assert load_latest(scratch, weights_only=False).step == 1


def test_policy_wait_blocks_until_the_previous_save_is_written(scratch):
    gate = Gate()
    ckpt = AsyncCheckpointer(scratch, policy="wait")
    ckpt.save({"gate": gate}, step=1)
    assert gate.entered.wait(timeout=60)
    second = threading.Thread(target=ckpt.save, args=({"w": torch.ones(3)},), kwargs={"step": 2})
    second.start()
    second.join(timeout=0.3)
    assert second.is_alive(), "the second save must wait while the first is in flight"
    gate.opened.set()
    second.join(timeout=60)
    ckpt.close()
    assert load_latest(scratch).step == 2
    assert os.path.exists(os.path.join(scratch, "ckpt-000000001.pt"))


def test_keep_last_prunes_and_latest_points_at_the_newest(scratch):
    with AsyncCheckpointer(scratch, keep_last=2) as ckpt:
        for step in range(1, 6):
            ckpt.save({"w": torch.full((4,), float(step))}, step=step)
    assert sorted(os.listdir(scratch)) == ["ckpt-000000004.pt", "ckpt-000000005.pt", "latest"]
    loaded = load_latest(scratch)
    assert loaded.step == 5 and torch.equal(loaded.state["w"], torch.full((4,), 5.0))


def test_best_checkpoint_survives_pruning(scratch):
    metrics = {1: 5.0, 2: 6.0, 3: 7.0, 4: 1.0, 5: 9.0, 6: 9.0, 7: 9.0, 8: 9.0, 9: 9.0}
    saved = []
    with AsyncCheckpointer(scratch, keep_last=1, every_steps=3, on_improvement="min") as ckpt:
        for step, metric in metrics.items():
            if ckpt.maybe_save(lambda step=step: {"step": step}, step=step, metric=metric):
                saved.append(step)
    assert saved == [1, 3, 4, 6, 9]
    assert sorted(os.listdir(scratch)) == ["best", "ckpt-000000004.pt", "ckpt-000000009.pt", "latest"]
    assert load_latest(scratch).step == 9


def test_time_trigger(scratch):
    with AsyncCheckpointer(scratch, every_seconds=3600) as ckpt:
        assert not ckpt.due(step=1)
        assert ckpt.maybe_save({"w": torch.ones(1)}, step=1) is False
    with AsyncCheckpointer(scratch, every_seconds=1e-9) as ckpt:
        assert ckpt.maybe_save({"w": torch.ones(1)}, step=2) is True


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"keep_last": 0}, "keep_last must be at least 1"),
        ({"policy": "later"}, "policy must be one of"),
        ({"every_steps": 0}, "every_steps must be at least 1"),
    ],
)
def test_bad_arguments_are_one_line_errors(scratch, kwargs, message):
    with pytest.raises(UserError, match=message):
        AsyncCheckpointer(scratch, **kwargs)


def test_misuse_is_a_clear_error(scratch):
    ckpt = AsyncCheckpointer(scratch, on_improvement="max")
    with pytest.raises(UserError, match="needs metric="):
        ckpt.maybe_save({"w": torch.ones(1)}, step=1)
    ckpt.close()
    with pytest.raises(UserError, match="is closed"):
        ckpt.save({"w": torch.ones(1)}, step=2)


def test_load_latest_without_checkpoint_and_with_a_broken_pointer(scratch):
    assert load_latest(scratch) is None
    assert load_latest(os.path.join(scratch, "missing")) is None
    with open(os.path.join(scratch, "latest"), "w") as fh:
        fh.write("{not json")
    with pytest.raises(UserError, match="cannot read checkpoint pointer"):
        load_latest(scratch)


def test_stale_temporaries_are_removed_on_start(scratch):
    stale = [".ckpt-000000007.pt.tmp-12345", ".latest.abc_12.tmp"]
    for name in [*stale, "notes.txt"]:
        open(os.path.join(scratch, name), "wb").close()
    AsyncCheckpointer(scratch).close()
    assert sorted(os.listdir(scratch)) == ["notes.txt"]


def test_a_snapshot_reuses_the_memory_of_the_last_one_and_keeps_ties():
    from supplyline.fixes._snapshot import snapshot_to_cpu

    shared, other = torch.randn(64, 64), torch.randn(64, 64)
    first = snapshot_to_cpu({"a": shared, "b": shared, "c": other, "step": 1})
    shared.add_(1.0)  # training moves on
    second = snapshot_to_cpu({"a": shared, "b": shared, "c": other, "step": 2}, reuse=first)
    ptr = {k: second[k].untyped_storage().data_ptr() for k in "abc"}
    assert ptr["a"] == ptr["b"] != ptr["c"]  # the tie is kept, and the two tensors got two buffers
    assert {ptr["a"], ptr["c"]} == {first["a"].untyped_storage().data_ptr(), first["c"].untyped_storage().data_ptr()}
    assert torch.equal(second["a"], shared) and torch.equal(second["c"], other) and second["step"] == 2
    assert shared.untyped_storage().data_ptr() not in ptr.values()  # a copy, never the live weights
    # a shape the old snapshot lacks gets fresh memory
    third = snapshot_to_cpu({"a": torch.ones(3)}, reuse=second)
    assert torch.equal(third["a"], torch.ones(3))
