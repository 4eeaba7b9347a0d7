"""Steps without a DataLoader: the first update counted, evaluation inside the loop timed apart."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from supplyline.collect import steps as steps_module
from supplyline.collect.eval_spans import EvalSpans
from supplyline.collect.steps import StepClock
from supplyline.collect.torch_hooks import Controller, TorchHooks
from supplyline.phases import DATA_WAIT


def _train(model, opt, n, evaluate_every=0, evaluate=None):
    for it in range(n):
        if evaluate_every and it % evaluate_every == 0:
            evaluate()
        loss = model(torch.randn(16, 32)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.fixture
def hooked():
    installed = []

    def make(clock):
        h = TorchHooks(clock, Controller())
        h.install()
        installed.append(h)
        return h

    yield make
    for h in installed:
        h.uninstall()


def test_without_a_dataloader_the_first_update_is_a_step(hooked):
    clock = StepClock()
    hooked(clock)
    model = nn.Linear(32, 32)
    _train(model, torch.optim.SGD(model.parameters(), lr=0.01), 6)
    clock.finish()
    # one step per update: the first opens at the first backward, not at the first update's end
    assert clock.step_count == 6
    assert clock.steps["compute_hooked_s"][0] > 0  # the first backward and step are inside it


def test_without_an_optimizer_backward_calls_still_mark_steps(hooked):
    clock = StepClock()
    hooked(clock)
    model = nn.Linear(32, 32)
    for _ in range(5):
        model(torch.randn(4, 32)).sum().backward()
    clock.finish()
    assert clock.step_count == 4  # unchanged: no optimizer, the first backward's end opens the first step


def _set_clock_phases(monkeypatch, phases: tuple[str, ...]) -> None:
    monkeypatch.setattr(steps_module, "PHASES", phases)
    # keep the column order the clock appends in: start, duration, phases..., the rest
    fields = (
        "start_s",
        "duration_s",
        *(f"{p}_s" for p in phases),
        "batches",
        "h2d_bytes",
        "data_wait_cpu_s",
        "cpu_s",
        "cpu_wait_s",
        "whatif",
    )
    monkeypatch.setattr(steps_module, "STEP_FIELDS", fields)


@pytest.fixture
def eval_phase(monkeypatch):
    """A step clock with an ``eval`` phase, as the doctor's clock has (the phase table lists it)."""
    if "eval" not in steps_module.PHASES:
        _set_clock_phases(monkeypatch, (*steps_module.PHASES, "eval"))


def test_no_grad_evaluation_in_the_loop_is_timed_as_eval(hooked, eval_phase):
    clock = StepClock()
    hooks = hooked(clock)
    model = nn.Sequential(nn.Linear(32, 512), nn.ReLU(), nn.Linear(512, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        for _ in range(20):
            model(torch.randn(64, 32))
        model.train()

    _train(model, opt, 12, evaluate_every=4, evaluate=estimate_loss)
    clock.finish()
    evals = clock.steps["eval_s"]
    assert clock.step_count == 12
    # iterations 4 and 8 evaluate inside steps 4 and 8 (a step ends at its update; iteration 0 evaluates before any)
    assert [i for i, e in enumerate(evals) if e > 0] == [4, 8]
    assert clock.outside["eval"] > 0
    assert hooks.eval_spans.spans == 3  # one span each: model.eval() inside no_grad is not counted again
    assert all(e <= d for e, d in zip(evals, clock.steps["duration_s"]))


def test_torch_internal_no_grad_is_not_eval(hooked, eval_phase):
    clock = StepClock()
    hooks = hooked(clock)
    model = nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(3):
        model(torch.randn(4, 32)).sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # no_grad inside torch
        nn.init.zeros_(torch.empty(3))  # no_grad inside torch
        opt.step()
    assert hooks.eval_spans.spans == 0


def test_model_eval_without_train_ends_at_the_next_backward(hooked, eval_phase):
    clock = StepClock()
    hooks = hooked(clock)
    model = nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model(torch.randn(4, 32)).sum().backward()
    opt.step()
    model.eval()  # a job that fine-tunes in eval mode (frozen batch norm) and never calls train()
    assert clock.phase == "eval"
    model(torch.randn(4, 32)).sum().backward()
    # eval ended; with no loader seen, the gap after backward is the loop's own batch building
    assert clock.phase in (None, DATA_WAIT) and hooks.eval_spans.spans == 1
    opt.step()
    assert clock.steps["compute_hooked_s"][-1] > 0


def test_without_the_eval_phase_nothing_is_patched(monkeypatch):
    _set_clock_phases(monkeypatch, tuple(p for p in steps_module.PHASES if p != "eval"))
    clock = StepClock()
    spans = EvalSpans(clock)
    assert "eval" not in clock.acc and spans.install() is False
    assert not hasattr(torch.no_grad.__enter__, "__wrapped__")
