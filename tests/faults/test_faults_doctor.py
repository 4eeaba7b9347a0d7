"""The doctor, merge, report and compare under faults: real processes, real signals, real broken records,
a real full file system. Each case asserts the exit code, one clear line (no supplyline traceback), and
that nothing measured is lost or left half-written."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
from doctor_faults_helpers import (
    DDP_KILL,
    TRAIN,
    assert_one_line,
    fill,
    load,
    no_supplyline_frames,
    no_temp_files,
    rank_records,
    small_tmpfs,
    start_supplyline,
    supplyline,
    torchrun,
    wait_for_line,
    write,
)


@pytest.fixture(scope="module")
def train(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write(str(tmp_path_factory.mktemp("job")), "train.py", TRAIN)


@pytest.fixture(scope="module")
def good_record(train: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real record from a real doctor run: the base the corrupt and rank records are made from."""
    out = str(tmp_path_factory.mktemp("good") / "rep")
    done = supplyline(["doctor", "--quiet", "--no-what-if", "--steps", "30", "--out", out, train])
    assert done.returncode == 0, done.stderr
    return load(os.path.join(out, "record.json"))


def _saved(tmp: str, name: str, record: dict[str, Any]) -> str:
    os.makedirs(os.path.join(tmp, name))
    with open(os.path.join(tmp, name, "record.json"), "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    return os.path.join(tmp, name)


# -- SIGTERM, SIGINT, os._exit: the run's diagnosis is written before the process ends ---------------


def test_sigterm_writes_the_report_then_dies_by_sigterm(train, tmp_path):
    out = str(tmp_path / "rep")
    proc = start_supplyline(["doctor", "--out", out, train, "--batches", "100000", "--ready-after", "20"])
    wait_for_line(proc, "ready")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGTERM  # as SIGTERM would end it: a shell sees 143
    record = load(os.path.join(out, "record.json"))
    assert record["outcome"]["reason"] == "terminated" and record["outcome"]["exit_code"] == 143
    assert len(record["steps"]["duration_s"]) >= 20  # the steps measured before the signal are kept
    assert "stopped by SIGTERM" in err and "Verdict:" in err
    assert sorted(f for f in os.listdir(out) if f.endswith((".json", ".html"))) == [
        "record.json",
        "report.html",
        "report.json",
        "trace.json",
    ]
    no_supplyline_frames(err)
    no_temp_files(out)


def test_sigterm_with_dataloader_workers_leaves_no_worker_behind(train, tmp_path):
    import psutil

    out = str(tmp_path / "rep")
    proc = start_supplyline(
        ["doctor", "--quiet", "--out", out, train, "--batches", "100000", "--workers", "2", "--ready-after", "10"]
    )
    wait_for_line(proc, "ready")
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert workers
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGTERM, err
    assert load(os.path.join(out, "record.json"))["outcome"]["reason"] == "terminated"
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive
    no_supplyline_frames(err)


def test_sigterm_to_the_whole_process_group_with_workers(train, tmp_path):
    # Slurm and most schedulers signal every process of the job: the forked workers too.
    out = str(tmp_path / "rep")
    args = ["doctor", "--quiet", "--out", out, train, "--batches", "100000", "--workers", "2", "--ready-after", "10"]
    proc = start_supplyline(args, group=True)
    wait_for_line(proc, "ready")
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGTERM, err
    assert load(os.path.join(out, "record.json"))["outcome"]["reason"] == "terminated"
    no_supplyline_frames(err)
    assert "Traceback" not in err  # no worker printed one either


def test_sigint_still_writes_the_report_with_exit_130(train, tmp_path):
    out = str(tmp_path / "rep")
    proc = start_supplyline(["doctor", "--quiet", "--out", out, train, "--batches", "100000", "--ready-after", "20"])
    wait_for_line(proc, "ready")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 130, err
    assert load(os.path.join(out, "record.json"))["outcome"]["reason"] == "interrupted"
    no_supplyline_frames(err)


def test_os_exit_in_the_script_keeps_its_code_and_writes_the_report(train, tmp_path):
    out = str(tmp_path / "rep")
    done = supplyline(["doctor", "--out", out, train, "--os-exit-at", "25", "7"])
    assert done.returncode == 7
    record = load(os.path.join(out, "record.json"))
    assert record["outcome"]["reason"] == "os_exit" and record["outcome"]["exit_code"] == 7
    assert len(record["steps"]["duration_s"]) >= 25
    assert "the script called os._exit(7)" in done.stderr and "Verdict:" in done.stderr
    assert os.path.exists(os.path.join(out, "report.html"))
    no_supplyline_frames(done.stderr)


def test_os_exit_of_forked_dataloader_workers_is_not_taken_for_the_scripts(train, tmp_path):
    # multiprocessing ends each fork-started worker with os._exit: those must exit as before.
    out = str(tmp_path / "rep")
    done = supplyline(["doctor", "--quiet", "--no-what-if", "--out", out, train, "--batches", "40", "--workers", "2"])
    assert done.returncode == 0, done.stderr
    assert "os._exit" not in done.stderr and "done" in done.stdout
    assert load(os.path.join(out, "record.json"))["outcome"]["reason"] == "completed"


# -- the user's traceback and the doctor's own advice -------------------------------------------------


def test_users_traceback_has_no_supplyline_frames(train, tmp_path):
    out = str(tmp_path / "rep")
    done = supplyline(["doctor", "--quiet", "--out", out, train, "--fail-item", "13"])
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith("ValueError: planted bad item 13")
    assert "__getitem__" in done.stderr and "train.py" in done.stderr  # the user's frames are all there
    no_supplyline_frames(done.stderr)
    assert load(os.path.join(out, "record.json"))["outcome"]["exception_type"] == "ValueError"


def test_no_use_steps_advice_when_steps_was_given(train, tmp_path):
    out = str(tmp_path / "rep")
    done = supplyline(["doctor", "--steps", "500", "--out", out, train, "--batches", "30"])
    assert done.returncode == 0, done.stderr
    note = load(os.path.join(out, "record.json"))["whatif"]["note"]
    assert "--steps 500 was reached" in note and "use --steps N" not in note
    assert "use --steps N" not in done.stderr


def test_module_package_without_main_is_one_line_as_python_says(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise SystemExit('the package must not be imported')\n")
    out = tmp_path / "rep"
    done = supplyline(["doctor", "--out", str(out), "-m", "mypkg"], cwd=str(tmp_path))
    assert_one_line(done, 1, "No module named mypkg.__main__; 'mypkg' is a package and cannot be directly executed")
    assert not out.exists()  # refused before anything was started or written


def test_module_package_with_main_still_runs(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("print('main ran')\n")
    done = supplyline(["doctor", "--quiet", "--out", str(tmp_path / "rep"), "-m", "mypkg"], cwd=str(tmp_path))
    assert done.returncode == 0 and "main ran" in done.stdout, done.stderr
    assert load(str(tmp_path / "rep" / "record.json"))["target"]["kind"] == "module"


def test_steps_not_a_number_is_one_line(train):
    assert_one_line(supplyline(["doctor", "--steps", "abc", train]), 2, "--steps")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_seconds_not_finite_is_refused_in_one_line(train, tmp_path, value):
    done = supplyline(["doctor", "--seconds", value, "--out", str(tmp_path / "rep"), train])
    assert_one_line(done, 2, "--seconds")
    assert not (tmp_path / "rep").exists()


# -- non-UTF-8 paths ------------------------------------------------------------------------------------


@pytest.fixture
def odd_named_run(tmp_path) -> tuple[str, str]:
    """A real doctor run of a script whose file name is not UTF-8 (bytes 0xff 0xfe)."""
    raw = os.fsencode(str(tmp_path)) + b"/job-\xff\xfe.py"
    with open(raw, "w", encoding="utf-8") as fh:
        fh.write(TRAIN)
    out = str(tmp_path / "rep")
    done = supplyline(["doctor", "--quiet", "--no-what-if", "--steps", "20", "--out", out, os.fsdecode(raw)])
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr
    return out, done.stderr


def test_doctor_writes_every_file_for_a_non_utf8_script_path(odd_named_run):
    out, _ = odd_named_run
    for name in ("record.json", "report.json", "trace.json", "report.html"):
        with open(os.path.join(out, name), "rb") as fh:
            fh.read().decode("utf-8")  # valid UTF-8, the odd bytes escaped


def test_report_html_for_a_non_utf8_script_path(odd_named_run, tmp_path):
    out, _ = odd_named_run
    dest = tmp_path / "again"
    done = supplyline(["report", out, "--html", "--out", str(dest)])
    assert done.returncode == 0, done.stderr
    no_supplyline_frames(done.stderr)
    html = (dest / "report.html").read_bytes().decode("utf-8")
    assert "job-" in html and "\\udcff" in html


# -- malformed records: report, compare, merge ------------------------------------------------------------

BAD = {
    "binary": None,  # not JSON, not even text
    "monitor-null": ("monitor", None),
    "steps-string": ("steps", "lots"),
    "distributed-string": ("distributed", "x"),
}


def _bad_dir(tmp: str, kind: str, good: dict[str, Any]) -> str:
    if BAD[kind] is None:
        os.makedirs(os.path.join(tmp, kind))
        with open(os.path.join(tmp, kind, "record.json"), "wb") as fh:
            fh.write(b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary")
        return os.path.join(tmp, kind)
    key, value = BAD[kind]
    return _saved(tmp, kind, {**good, key: value})


@pytest.mark.parametrize("kind", sorted(BAD))
def test_report_on_a_malformed_record_is_one_line(good_record, tmp_path, kind):
    bad = _bad_dir(str(tmp_path), kind, good_record)
    assert_one_line(supplyline(["report", bad]), 2, "record")


@pytest.mark.parametrize("kind", sorted(BAD))
def test_compare_with_a_malformed_record_is_one_line(good_record, tmp_path, kind):
    base = _saved(str(tmp_path), "base", good_record)
    bad = _bad_dir(str(tmp_path), kind, good_record)
    assert_one_line(supplyline(["compare", base, bad, "--max-slowdown", "10"]), 2, "NEW:")


def test_nan_step_times_do_not_pass_the_ci_gate(good_record, tmp_path):
    base = _saved(str(tmp_path), "base", good_record)
    nan = json.loads(json.dumps(good_record))
    nan["steps"]["duration_s"] = [float("nan")] * len(nan["steps"]["duration_s"])
    new = _saved(str(tmp_path), "new", nan)
    assert "NaN" in open(os.path.join(new, "record.json"), encoding="utf-8").read()
    assert_one_line(supplyline(["compare", base, new, "--max-slowdown", "10"]), 2, "non-finite")


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_compare_refuses_a_non_finite_threshold(good_record, tmp_path, value):
    base = _saved(str(tmp_path), "base", good_record)
    assert_one_line(supplyline(["compare", base, base, "--max-slowdown", value]), 2, "--max-slowdown")


@pytest.mark.parametrize("kind", sorted(BAD))
def test_merge_over_rank_records_with_one_malformed(good_record, tmp_path, kind):
    out = str(tmp_path / "job")
    rank_records(good_record, out, [0, 1], world=2)
    bad = _bad_dir(str(tmp_path), kind, good_record)
    os.replace(os.path.join(bad, "record.json"), os.path.join(out, "rank-1", "record.json"))
    done = supplyline(["merge", out, "--json"])
    assert done.returncode == 0, done.stderr
    no_supplyline_frames(done.stderr)
    report = json.loads(done.stdout)
    assert report["missing_ranks"] == [1] and report["ranks"][0]["rank"] == 0  # rank 0's measurements kept
    assert any(n.startswith("rank 1: record not read") for n in report["notes"])
    assert "Cannot judge whether rank(s) [1]" in report["verdict"]["sentence"]
    assert load(os.path.join(out, "report.json")) == report


def test_merge_with_every_record_malformed_is_one_line(tmp_path):
    out = tmp_path / "job"
    for r in (0, 1):
        (out / f"rank-{r}").mkdir(parents=True)
        (out / f"rank-{r}" / "record.json").write_bytes(b"\x00\xff garbage")
    assert_one_line(supplyline(["merge", str(out)]), 2, "no readable rank record", "rank 0", "rank 1")
    assert not (out / "report.json").exists()


def test_merge_without_the_stragglers_record_does_not_claim_no_straggler(good_record, tmp_path):
    out = str(tmp_path / "job")
    rank_records(good_record, out, [0, 2], world=3)  # rank 1, perhaps the slow one, left no record
    done = supplyline(["merge", out])
    assert done.returncode == 0, done.stderr
    report = load(os.path.join(out, "report.json"))
    sentence = report["verdict"]["sentence"]
    assert report["verdict"]["bound"] == "unknown"
    assert "Cannot judge whether rank(s) [1] held the others back" in sentence
    assert "No straggler" not in sentence and "no single rank" not in sentence
    assert "Cannot judge" in " ".join((done.stdout + done.stderr).split())  # the summary says it too


def test_merge_names_a_rank_that_started_and_left_no_record(good_record, tmp_path):
    out = str(tmp_path / "job")
    rank_records(good_record, out, [0], world=2)
    os.makedirs(os.path.join(out, "rank-1"))
    with open(os.path.join(out, "rank-1", "started.json"), "w", encoding="utf-8") as fh:
        json.dump({"job_key": "job|127.0.0.1:1|2|0", "pid": 999999, "hostname": "node-a", "create_time": 0}, fh)
    done = supplyline(["merge", out, "--json"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    first = report["crashes"][0]
    assert first["rank"] == 1 and first["reason"] == "killed" and first["first"]
    assert report["verdict"]["sentence"].startswith("Rank 1 ended with no record: killed (SIGKILL")


# -- full disk --------------------------------------------------------------------------------------------


def test_doctor_on_a_small_full_disk_prints_the_summary_and_names_what_was_not_written(train, tmp_path):
    with small_tmpfs(str(tmp_path / "small"), "64k") as small:
        out = os.path.join(small, "rep")
        done = supplyline(["doctor", "--steps", "40", "--out", out, train, "--os-exit-at", "45", "3"])
        assert done.returncode == 3  # the script's exit code, whatever the disk says
        assert "Verdict:" in done.stderr  # the summary needs no disk
        warnings = [line for line in done.stderr.splitlines() if "warning" in line]
        assert len(warnings) == 1 and "No space left on device" in warnings[0], done.stderr
        no_supplyline_frames(done.stderr)
        no_temp_files(out)
        for name in os.listdir(out):
            if name.endswith(".json"):
                load(os.path.join(out, name))  # every file there is whole
        # which files fit depends on their sizes this run; every one that did not is named, and only those
        expected = ("record.json", "report.json", "trace.json", "report.html")
        missing = [name for name in expected if not os.path.exists(os.path.join(out, name))]
        assert missing, os.listdir(out)  # 64 KiB cannot hold them all
        named = [name for name in expected if f"{name}: No space left on device" in warnings[0]]
        assert named == missing, (warnings[0], os.listdir(out))
        if "Report: " in done.stderr:
            listed = done.stderr.split("Report: ")[1]
            assert not any(name in listed for name in missing)  # the summary lists only what is on disk


def test_doctor_on_a_completely_full_disk_still_prints_the_summary(train, tmp_path):
    with small_tmpfs(str(tmp_path / "small"), "64k") as small:
        out = os.path.join(small, "rep")
        os.makedirs(out)
        fill(small)
        done = supplyline(["doctor", "--steps", "30", "--out", out, train])
        assert done.returncode == 0, done.stderr
        assert "Verdict:" in done.stderr and "Report: " not in done.stderr
        warnings = [line for line in done.stderr.splitlines() if "warning" in line]
        assert len(warnings) == 1 and "record.json: No space left on device" in warnings[0], done.stderr
        no_supplyline_frames(done.stderr)
        no_temp_files(out)
        assert not os.path.exists(os.path.join(out, "record.json"))


def test_report_html_to_a_full_disk_is_one_line(good_record, tmp_path):
    src = _saved(str(tmp_path), "src", good_record)
    with small_tmpfs(str(tmp_path / "small"), "64k") as small:
        fill(small)
        done = supplyline(["report", src, "--html", "--out", small])
        assert_one_line(done, 2, "report.html: No space left on device")
        no_temp_files(small)


# -- torchrun: a rank killed outright ---------------------------------------------------------------------


def _check_killed_rank_report(out: str, dead: int, alive: int, stderr: str) -> None:
    assert os.path.exists(os.path.join(out, f"rank-{alive}", "record.json")), stderr
    report = load(os.path.join(out, "report.json"))
    first = report["crashes"][0]
    assert first["rank"] == dead and first["reason"] == "killed" and first["first"]
    assert report["missing_ranks"] == [dead]
    survivor = {r["rank"]: r for r in report["ranks"]}[alive]
    assert survivor["steps"] >= 5  # the survivor's measurements reached the merged report
    assert f"Rank {dead} ended with no record: killed" in report["verdict"]["sentence"]
    assert f"Cannot judge whether rank(s) [{dead}]" in report["verdict"]["sentence"]
    assert "no single rank" not in report["verdict"]["sentence"]
    no_supplyline_frames(stderr)


@pytest.mark.slow
def test_torchrun_rank_sigkilled_survivor_writes_and_merges(tmp_path):
    script = write(str(tmp_path), "ddp_kill.py", DDP_KILL)
    out = str(tmp_path / "rep")
    done = torchrun(
        [
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "supplyline",
            "doctor",
            "--no-what-if",
            "--steps",
            "300",
            "--out",
            out,
            "--",
            script,
            "1",
            "12",
        ],
        str(tmp_path),
    )
    assert done.returncode != 0
    _check_killed_rank_report(out, dead=1, alive=0, stderr=done.stderr)


@pytest.mark.slow
def test_doctor_nproc_rank0_sigkilled_rank1_record_reaches_the_merge(tmp_path):
    script = write(str(tmp_path), "ddp_kill.py", DDP_KILL)
    out = str(tmp_path / "rep")
    done = supplyline(
        ["doctor", "--nproc-per-node", "2", "--no-what-if", "--steps", "300", "--out", out, script, "0", "12"],
        cwd=str(tmp_path),
    )
    assert done.returncode != 0
    _check_killed_rank_report(out, dead=0, alive=1, stderr=done.stderr)
    assert "Job verdict" in done.stderr + done.stdout
