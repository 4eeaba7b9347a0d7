"""`supplyline stage`: a verified copy in RAM, refusals when it will not fit, cleanup."""

from __future__ import annotations

import os

from storage_helpers import make_imagefolder, tree_bytes


def test_stage_copies_verifies_and_cleans_up(tmp_path, cli):
    src = str(tmp_path / "src")
    make_imagefolder(src, ["a", "b"], 10)
    os.symlink(str(tmp_path / "gone"), os.path.join(src, "a", "broken.jpg"))
    dst = str(tmp_path / "ram" / "copy")
    done = cli(["stage", src, dst])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"use this path in your training script: {dst}"
    assert "skipped 1 unreadable: a/broken.jpg (dangling symlink)" in done.stdout
    copied = tree_bytes(dst)
    marker = copied.pop(".supplyline-stage.json")
    source = tree_bytes(src, skip_broken=True)
    assert copied == source and len(source) == 20 and b'"files": 20' in marker
    again = cli(["stage", src, dst])
    assert again.returncode == 0 and "already staged and up to date" in again.stdout
    (tmp_path / "src" / "a" / "new.jpg").write_bytes(b"x")
    stale = cli(["stage", src, dst])
    assert stale.returncode == 2 and "--force replaces it" in stale.stderr
    assert cli(["stage", src, dst, "--force"]).returncode == 0 and "a/new.jpg" in tree_bytes(dst)
    gone = cli(["stage", src, dst, "--cleanup"])
    assert gone.returncode == 0 and not os.path.exists(dst)
    assert os.listdir(tmp_path / "ram") == []


def test_refuses_when_it_will_not_fit(tmp_path, cli, small_mount):
    src = str(tmp_path / "src")
    make_imagefolder(src, ["a"], 20, size=150_000)  # ~3 MiB
    mount = small_mount("size=2m")
    done = cli(["stage", src, os.path.join(mount, "copy")])
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "not staged" in done.stderr and "free" in done.stderr
    assert os.listdir(mount) == []


def test_stage_bad_input_and_foreign_dst(tmp_path, cli):
    missing = cli(["stage", str(tmp_path / "nope"), str(tmp_path / "x")])
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = cli(["stage", str(tmp_path / "empty"), str(tmp_path / "x")])
    assert empty.returncode == 2 and "no readable files" in empty.stderr
    src = str(tmp_path / "src")
    make_imagefolder(src, ["a"], 2)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    refused = cli(["stage", src, str(foreign)])
    assert refused.returncode == 2 and "not made by supplyline stage" in refused.stderr
    no_cleanup = cli(["stage", src, str(foreign), "--cleanup"])
    assert no_cleanup.returncode == 2 and (foreign / "keep.txt").exists()
    for done in (missing, empty, refused, no_cleanup):
        assert "Traceback" not in done.stderr
