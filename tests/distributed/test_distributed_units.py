"""Fast checks of the pieces: collective timing in one real gloo process, rank identity, launcher argv, errors."""

from __future__ import annotations

import argparse
import json
import os

import pytest
import torch
import torch.distributed as dist
from distributed_helpers import TRAIN, free_port, run, supplyline
from torch import nn

from supplyline.collect.collectives import CollectiveHooks
from supplyline.collect.steps import StepClock
from supplyline.collect.torch_hooks import Controller, TorchHooks
from supplyline.doctor.launcher import torchrun_argv
from supplyline.doctor.ranks import RankInfo
from supplyline.errors import UserError
from supplyline.launch import Target


@pytest.fixture
def gloo_world_of_one():
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _train_steps(model: nn.Module, steps: int) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=8
    )
    for i, (x, y) in enumerate(data):
        if i == steps:
            break
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        dist.all_reduce(loss.detach())  # a metric, reduced directly by the loop


def test_ddp_allreduce_and_direct_collectives_are_timed(gloo_world_of_one):
    original = dist.all_reduce, nn.parallel.DistributedDataParallel.__init__
    clock = StepClock()
    hooks, coll = TorchHooks(clock, Controller()), CollectiveHooks(clock)
    hooks.install()
    coll.install()
    hooks.after_backward = coll.take_blocked
    try:
        _train_steps(nn.parallel.DistributedDataParallel(nn.Linear(8, 1)), 6)
    finally:
        coll.uninstall()
        hooks.uninstall()
    clock.finish()
    summary = coll.summary()
    assert summary["ddp_models"] == 1 and summary["bucket_allreduces"] == 6 and summary["direct_calls"] == 6
    assert clock.step_count >= 5 and all(c > 0 for c in clock.steps["collective_s"])
    assert (dist.all_reduce, nn.parallel.DistributedDataParallel.__init__) == original  # uninstall restores


def test_a_users_own_comm_hook_still_runs_inside_the_timed_one(gloo_world_of_one):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    calls: list[int] = []

    def my_hook(state, bucket):  # type: ignore[no-untyped-def]
        calls.append(1)
        return default_hooks.allreduce_hook(state, bucket)

    clock = StepClock()
    coll = CollectiveHooks(clock)
    coll.install()
    try:
        model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1))
        model.register_comm_hook(None, my_hook)  # DDP allows one hook; ours is in, the user's must not fail
        _train_steps(model, 3)
    finally:
        coll.uninstall()
    assert len(calls) == 3 and coll.summary()["bucket_allreduces"] == 3
    assert coll.summary()["user_comm_hooks"] == [
        "test_a_users_own_comm_hook_still_runs_inside_the_timed_one.<locals>.my_hook"
    ]


def test_rank_identity_is_shared_by_the_ranks_of_one_launch():
    env = {
        "RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "0",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": "job7",
    }
    one, other = RankInfo.from_env(env), RankInfo.from_env({**env, "RANK": "3", "GROUP_RANK": "1"})
    assert one is not None and other is not None
    assert (one.rank, one.world_size, one.node_rank, other.node_rank) == (1, 4, 0, 1)
    assert one.job_key == other.job_key != RankInfo.from_env({**env, "MASTER_PORT": "29501"}).job_key  # type: ignore[union-attr]
    assert RankInfo.from_env({}) is None


def _launcher_args(**kw: object) -> argparse.Namespace:
    base = dict(
        nproc_per_node=2,
        nnodes="1",
        node_rank=None,
        rdzv_endpoint=None,
        rdzv_backend="c10d",
        rdzv_id="supplyline",
        steps=10,
        seconds=None,
        what_if=False,
        what_if_steps=20,
        quiet=False,
    )
    return argparse.Namespace(**{**base, **kw})


def test_launcher_reinvokes_the_doctor_under_torchrun():
    argv = torchrun_argv(Target("script", "/x/train.py", ["--lr", "1"]), "/out", _launcher_args())
    assert argv[1:3] == ["-m", "torch.distributed.run"] and "--standalone" in argv
    doctor = argv[argv.index("supplyline") :]
    assert doctor[:4] == ["supplyline", "doctor", "--out", "/out"] and "--no-what-if" in doctor
    assert doctor[-4:] == ["--", "/x/train.py", "--lr", "1"]
    multi = torchrun_argv(
        Target("module", "pkg.train", []), "/out", _launcher_args(nnodes="2", rdzv_endpoint="head:29400", node_rank=1)
    )
    assert "--standalone" not in multi and multi[multi.index("--rdzv-endpoint") + 1] == "head:29400"
    assert multi[-2:] == ["-m", "pkg.train"]


@pytest.mark.parametrize(
    "kw, words",
    [({"nnodes": "2"}, "--rdzv-endpoint"), ({"seconds": 5.0}, "--steps"), ({"nproc_per_node": 0}, "at least 1")],
)
def test_launcher_rejects_options_that_cannot_work(kw, words):
    with pytest.raises(UserError, match=words):
        torchrun_argv(Target("script", "/x/train.py", []), "/out", _launcher_args(**kw))


def test_seconds_under_torchrun_is_one_clear_line(tmp_path):
    env_rank = {"RANK": "0", "WORLD_SIZE": "2"}
    import subprocess

    from distributed_helpers import child_env

    proc = subprocess.run(
        supplyline("doctor", "--seconds", "3", "--out", str(tmp_path / "r"), TRAIN),
        cwd=str(tmp_path),
        env={**child_env(), **env_rank},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "supplyline doctor: under torchrun use --steps N, not --seconds: every rank must stop at the same step"
    ]


def test_merge_without_rank_records_is_one_clear_line(tmp_path):
    proc = run(supplyline("merge", str(tmp_path)), str(tmp_path))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "no rank records" in proc.stderr
    missing = run(supplyline("merge", str(tmp_path / "nope")), str(tmp_path))
    assert missing.returncode == 2 and "no such directory" in missing.stderr


def rank(
    r: int,
    *,
    reason: str = "completed",
    exc: str | None = None,
    message: str | None = None,
    ended: float = 0.0,
    own: float = 10.0,
    wait: float = 0.0,
    data_wait: float = 0.0,
    series: list[float] | None = None,
    steps: int = 9,
):
    """A hand-built rank row: ``own`` ms of its own work a step (``data_wait`` of it waiting on data),
    ``wait`` ms in collectives."""
    from supplyline import phases as P
    from supplyline.analyze.distributed import RankOutcome, RankRow
    from supplyline.analyze.verdict import Verdict

    phases = {p: 0.0 for p in P.PHASE_ORDER} | {
        P.COMPUTE: own - data_wait,
        P.DATA_WAIT: data_wait,
        P.COLLECTIVE: wait,
    }
    return RankRow(
        rank=r,
        node_rank=0,
        hostname="h",
        local_rank=r,
        steps=steps,
        step_ms=own + wait,
        phase_ms=phases,
        own_ms=own,
        outcome=RankOutcome(reason, 1 if exc else 0, exc, message, ended),
        verdict=Verdict("compute", f"rank {r} is compute-bound"),
        top_finding=None,
        collectives={"ddp_models": 1},
        own_series=series if series is not None else [own] * steps,
    )


def test_the_first_failure_is_the_cause_not_the_peers_that_lost_it():
    from supplyline.analyze.distributed import crash_list

    peer = (
        "Got the following error when running the callback: RuntimeError: [pair.cc:553] Connection closed by "
        "peer [127.0.0.1]:2966. This is typically caused by a remote worker crashing.\n\nAt:\n  x.py(1): f"
    )
    rows = [
        rank(0, reason="exception", exc="RuntimeError", message=peer, ended=10.0),
        rank(1, reason="exception", exc="ValueError", message="bad batch", ended=11.0),
        rank(2, reason="terminated", exc="Terminated", message="stopped by SIGTERM", ended=12.0),
        rank(3, reason="stopped", ended=9.0),
    ]
    crashes = crash_list(rows)
    assert [c.rank for c in crashes] == [1, 2, 0] and [c.first for c in crashes] == [True, False, False]
    assert crashes[2].exception_message is not None
    assert crashes[2].exception_message.startswith("[pair.cc:553] Connection closed by peer")
    assert "\n" not in crashes[2].exception_message


def test_the_rank_the_others_wait_for_is_the_straggler_and_its_cause_the_phase_it_exceeds_in():
    from supplyline.analyze.distributed import find_straggler, job_verdict, side_by_side

    slow = rank(1, own=30.0, data_wait=20.0, wait=0.5)
    rows = [rank(0, own=10.0, wait=20.5), slow, rank(2, own=10.0, wait=20.5)]
    s = find_straggler(rows)
    assert s is not None and (s.rank, s.phase, s.cause) == (1, "data_wait", "input")
    assert s.own_excess_ms == 20.0 and s.others_collective_ms == 20.5
    assert "the others wait for rank 1 in all-reduce" in s.sentence
    v = job_verdict(rows, s, [])
    assert v.bound == "input" and v.sentence.startswith("Straggler: rank 1")
    cells = side_by_side(rows)
    assert cells["own"].worst_rank == 1 and cells["own"].median_ms == 10.0 and cells["data_wait"].worst_ms == 20.0


def test_no_straggler_where_the_lead_is_not_persistent_or_the_others_do_not_wait():
    from supplyline.analyze.distributed import find_straggler, job_verdict

    # rank 1 is behind on average, but it leads in only 2 of 9 steps (a preempted host now and then)
    bursty = rank(1, own=30.0, data_wait=20.0, wait=0.5, series=[100.0, 100.0] + [10.0] * 7)
    assert find_straggler([rank(0, wait=20.5), bursty, rank(2, wait=20.5)]) is None
    # rank 1 does more of its own work, and nobody waits for it: not a straggler
    assert find_straggler([rank(0), rank(1, own=30.0, data_wait=20.0), rank(2)]) is None
    # every rank waits in collectives most of its step: communication-bound
    even = [rank(r, own=5.0, wait=15.0) for r in range(3)]
    assert job_verdict(even, None, []).bound == "collective"
    # a rank without a record: no "no straggler" claim
    assert job_verdict(even[:2], None, [], missing=[2]).bound == "unknown"


def test_the_merged_report_saves_the_same_fields_as_before_and_not_the_per_step_series():
    from supplyline.analyze.distributed import JobInfo, JobVerdict, MergedReport, find_straggler, side_by_side

    rows = [rank(0, wait=20.5), rank(1, own=30.0, data_wait=20.0, wait=0.5), rank(2, wait=20.5)]
    merged = MergedReport(
        job=JobInfo(3, 3, ["h"], "k", "job.py", []),
        verdict=JobVerdict("input", "s"),
        straggler=find_straggler(rows),
        side_by_side=side_by_side(rows),
        ranks=rows,
        missing_ranks=[],
        crashes=[],
        notes=[],
    )
    d = merged.to_dict()
    assert list(d) == [
        *("merged_report_version", "kind", "job", "verdict", "straggler", "side_by_side"),
        *("ranks", "missing_ranks", "crashes", "notes"),
    ]
    assert list(d["ranks"][0]) == [
        *("rank", "node_rank", "hostname", "local_rank", "steps", "step_ms", "phase_ms", "own_ms"),
        *("outcome", "verdict", "top_finding", "collectives"),
    ]
    assert d["straggler"]["rank"] == 1 and d["side_by_side"]["own"] == {
        "median_ms": 10.0,
        "worst_ms": 30.0,
        "worst_rank": 1,
    }
    json.dumps(d)  # plain JSON all the way down
