"""cProfile output, line-level hot spots and the Python-loop suggestion."""

from __future__ import annotations

import pstats


def test_python_pixel_loop_is_flagged_with_its_line(dsmod, quick, line_of):
    report = quick(dsmod.PixelLoop(), samples=20, line_seconds=0.5)
    loop_line = line_of(dsmod, "# LOOP")
    hot = report.lines.lines[0]
    assert hot.location.function == "normalize_pixels"
    assert hot.in_python_loop and hot.loop_line == loop_line
    assert loop_line < hot.location.line <= loop_line + 2  # a line in the loop's body
    flagged = [s for s in report.suggestions if s.kind == "python_loop"]
    assert flagged, report.suggestions
    assert f"{dsmod.__file__}:{loop_line}" in flagged[0].where
    assert "normalize_pixels" in flagged[0].where
    assert "vectorize" in flagged[0].action


def test_numpy_stage_is_not_flagged_as_a_python_loop(dsmod, quick):
    report = quick(dsmod.NumpyHeavy(), samples=4, line_seconds=0.3)
    assert not [s for s in report.suggestions if s.kind == "python_loop"]


def test_prof_file_opens_with_pstats_and_top_names_the_hot_function(dsmod, quick, tmp_path):
    prof = tmp_path / "out.prof"
    report = quick(dsmod.PixelLoop(), samples=10, prof_path=str(prof))
    stats = pstats.Stats(str(prof))
    names = {name for (_file, _line, name) in stats.stats}  # type: ignore[attr-defined]
    assert "normalize_pixels" in names
    assert report.profile.prof_path == str(prof)
    assert report.profile.samples == 10
    top = report.profile.top[0]
    assert top.location.function == "normalize_pixels" and top.calls == 10
    assert 0 < top.self_share <= 1
