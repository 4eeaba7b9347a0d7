"""End to end: ``supplyline preprocess`` in a real process, with --json and --prof."""

from __future__ import annotations

import json
import pstats

import pytest


@pytest.mark.slow
def test_cli_reports_ranks_and_writes_json_and_prof(cli, dataset_dir, tmp_path):
    out_json, out_prof = tmp_path / "report.json", tmp_path / "pp.prof"
    result = cli(
        [
            "preprocess",
            "pp_datasets:three_stages",
            "--samples",
            "12",
            "--workers",
            "1",
            "--batch-size",
            "4",
            "--json",
            str(out_json),
            "--prof",
            str(out_prof),
        ],
        cwd=dataset_dir,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "transform chain: transform.transforms" in result.stdout
    assert "Busy(6.0)" in result.stdout and "suggestions" in result.stdout
    assert "GIL" in result.stdout
    report = json.loads(out_json.read_text())
    assert report["schema"] == "supplyline.preprocess/1"
    assert report["getitem"]["count"] == 12
    ranked = sorted(report["chain"]["stages"], key=lambda s: s["share_of_sample"], reverse=True)
    assert ranked[0]["name"] == "Busy(6.0)"
    assert report["workers"]["workers"] == 1 and report["transfer"]["batch_size"] == 4
    assert report["gil"]["holds_gil"] in (True, False)
    assert {s["kind"] for s in report["suggestions"]} >= {"slow_stage", "python_loop"}
    assert pstats.Stats(str(out_prof)).total_calls > 0
    assert pstats.Stats(str(tmp_path / "pp.workers.prof")).total_calls > 0


def test_report_to_dict_is_plain_json(dsmod, quick):
    report = quick(dsmod.Raising(), samples=6)
    text = json.dumps(report.to_dict())  # no default=: every field must already be JSON-native
    assert json.loads(text)["errors"][0]["index"] == 3
