"""The doctor under torchrun, on CPU with gloo: real ranks, real DDP, real DataLoaders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from distributed_helpers import TRAIN, free_port, load, run, supplyline

pytestmark = pytest.mark.slow


def test_straggler_rank_and_its_input_cause_are_named(straggler_run):
    proc, out = straggler_run
    assert proc.returncode == 0, proc.stderr
    report = load(os.path.join(out, "report.json"))
    assert report["kind"] == "distributed" and report["job"]["world_size"] == 2
    s = report["straggler"]
    assert s is not None, report["ranks"]
    assert s["rank"] == 1 and s["cause"] == "input"
    assert report["verdict"]["bound"] == "input"
    assert "rank 1 waits" in s["sentence"] and "wait for rank 1 in all-reduce" in s["sentence"]
    fast, slow = report["ranks"]
    # Measured, not inferred: the fast rank's time goes to the all-reduce, the slow rank's to its loader.
    assert fast["phase_ms"]["collective"] > 3 * slow["phase_ms"]["collective"]
    assert slow["phase_ms"]["data_wait"] > 3 * fast["phase_ms"]["data_wait"]
    assert "Straggler: rank 1" in proc.stderr  # the merged summary, printed by rank 0


def test_each_rank_writes_its_own_record_with_timed_allreduce(straggler_run):
    proc, out = straggler_run
    for rank in (0, 1):
        rec = load(os.path.join(out, f"rank-{rank}", "record.json"))
        d = rec["distributed"]
        assert d["rank"] == rank and d["world_size"] == 2
        assert d["collectives"]["ddp_models"] == 1 and d["collectives"]["bucket_allreduces"] >= 20
        assert len(rec["steps"]["collective_s"]) == len(rec["steps"]["duration_s"]) >= 20
        assert os.path.exists(os.path.join(out, f"rank-{rank}", "report.json"))
    assert "rank 1: INPUT" in proc.stderr


def test_the_merged_top_fix_is_the_ranks_own(straggler_run):
    # written with the same snippets as each rank's own report.json, so it quotes the same lines
    _, out = straggler_run
    merged = load(os.path.join(out, "report.json"))
    for row in merged["ranks"]:
        own = load(os.path.join(out, f"rank-{row['rank']}", "report.json"))
        assert row["top_finding"] == (own["findings"][0] if own["findings"] else None)
    assert merged["straggler"]["its_top_finding"]["fix"] == merged["ranks"][1]["top_finding"]["fix"]


def test_merge_command_rebuilds_the_same_report(straggler_run, tmp_path):
    _, out = straggler_run
    copy = str(tmp_path / "copy")
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("report.json"))
    proc = run(supplyline("merge", "--json", copy), str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    first = load(os.path.join(out, "report.json"))
    assert again["straggler"]["rank"] == first["straggler"]["rank"] == 1
    assert again["ranks"] == first["ranks"]
    assert os.path.exists(os.path.join(copy, "report.json"))


def test_records_of_an_older_launch_are_left_out(straggler_run, tmp_path):
    _, out = straggler_run
    copy = str(tmp_path / "copy")
    shutil.copytree(out, copy)
    stale = load(os.path.join(copy, "rank-1", "record.json"))
    stale["distributed"]["job_key"] = "an-earlier-launch"
    stale["created_unix_s"] -= 3600
    os.makedirs(os.path.join(copy, "rank-1"), exist_ok=True)
    with open(os.path.join(copy, "rank-1", "record.json"), "w") as fh:
        json.dump(stale, fh)
    proc = run(supplyline("merge", "--json", copy), str(tmp_path))
    report = json.loads(proc.stdout)
    assert report["missing_ranks"] == [1] and report["straggler"] is None
    assert any("older launch" in n for n in report["notes"])


def test_healthy_job_run_to_its_end_has_no_straggler(tmp_path):
    """Through `supplyline doctor --nproc-per-node`; the script destroys its group, so the files merge."""
    out = str(tmp_path / "report")
    proc = run(
        supplyline(
            "doctor",
            "--nproc-per-node",
            "2",
            "--no-what-if",
            "--out",
            out,
            TRAIN,
            "--destroy",
            "--samples",
            "480",
            "--hidden",
            "512",
        ),
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    report = load(os.path.join(out, "report.json"))
    assert report["straggler"] is None, report["ranks"]
    assert [r["outcome"]["reason"] for r in report["ranks"]] == ["completed", "completed"]
    assert all(r["steps"] >= 25 for r in report["ranks"])
    assert report["crashes"] == [] and report["missing_ranks"] == []
    assert "records not gathered" not in proc.stderr  # a completed job merges from the files, silently


def test_two_nodes_on_one_machine_give_the_same_merged_report(tmp_path):
    """Two launchers rendezvous on localhost (c10d), each with its own --out as on two machines without a
    shared filesystem: rank 0 gathers the other node's record over torch.distributed and merges."""
    from distributed_helpers import child_env

    outs = [str(tmp_path / f"node{n}") for n in (0, 1)]
    endpoint = f"127.0.0.1:{free_port()}"
    procs = []
    for node in (0, 1):
        argv = supplyline(
            "doctor",
            "--nproc-per-node",
            "1",
            "--nnodes",
            "2",
            "--node-rank",
            str(node),
            "--rdzv-endpoint",
            endpoint,
            "--rdzv-id",
            "two-nodes",
            "--steps",
            "20",
            "--no-what-if",
            "--out",
            outs[node],
            TRAIN,
            "--slow-rank",
            "1",
            "--slow-ms",
            "3",
        )
        procs.append(
            subprocess.Popen(
                argv, cwd=str(tmp_path), env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outputs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    # c10d assigns group ranks by arrival: rank 0 may live on either launcher.
    merged = [o for o in outs if os.path.exists(os.path.join(o, "report.json"))]
    assert len(merged) == 1, outputs
    report = load(os.path.join(merged[0], "report.json"))
    assert report["job"]["world_size"] == report["job"]["ranks_reported"] == 2 and report["missing_ranks"] == []
    assert sorted(r["node_rank"] for r in report["ranks"]) == [0, 1]
    assert report["straggler"] is not None and report["straggler"]["rank"] == 1
    assert report["straggler"]["cause"] == "input"
    other = outs[1 - outs.index(merged[0])]
    assert os.listdir(other) == ["rank-1"] and "run `supplyline merge" in "".join(e for _, e in outputs)


def test_a_crashed_rank_is_in_the_report_with_the_others_records(tmp_path):
    out = str(tmp_path / "report")
    proc = run(
        supplyline(
            "doctor",
            "--nproc-per-node",
            "2",
            "--no-what-if",
            "--steps",
            "30",
            "--out",
            out,
            TRAIN,
            "--crash-rank",
            "1",
            "--crash-step",
            "8",
        ),
        str(tmp_path),
    )
    assert proc.returncode != 0
    report = load(os.path.join(out, "report.json"))
    first = report["crashes"][0]
    assert first["rank"] == 1 and first["first"] and first["exception_type"] == "RuntimeError"
    assert "planted failure on rank 1" in first["exception_message"]
    assert "Rank 1 failed after" in report["verdict"]["sentence"]
    ranks = {r["rank"]: r for r in report["ranks"]}
    assert set(ranks) == {0, 1} and ranks[0]["steps"] >= 5  # the survivor's measurements are kept
    assert ranks[0]["outcome"]["reason"] in ("exception", "terminated")


def test_records_from_before_the_collective_phase_still_load(straggler_run, tmp_path):
    from supplyline.analyze.report import build_report
    from supplyline.record import load_record

    _, out = straggler_run
    old = load(os.path.join(out, "rank-1", "record.json"))
    del old["distributed"]
    del old["steps"]["collective_s"]
    path = tmp_path / "record.json"
    path.write_text(json.dumps(old))
    record = load_record(str(path))
    assert record.distributed is None
    report = build_report(record)
    assert report.phase_ms_per_step["collective"] == 0.0 and report.verdict.bound == "input"


def test_report_command_merges_a_torchrun_directory(straggler_run, tmp_path):
    _, out = straggler_run
    copy = str(tmp_path / "copy")
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("report.json"))
    proc = run(supplyline("report", copy), str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "Straggler: rank 1" in proc.stderr and load(os.path.join(copy, "report.json"))["kind"] == "distributed"
