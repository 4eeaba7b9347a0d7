"""The ``%%supplyline`` line: the doctor's own options, one clear line for what a cell cannot take."""

from __future__ import annotations

import pytest

from supplyline.errors import UserError
from supplyline.notebook.magic import options_parser, parse_options


def test_the_doctors_options_reach_the_session(tmp_path):
    args = parse_options(f"--steps 30 --seconds 5 --no-what-if --try-steps 12 --sample-hz 100 --out {tmp_path}/r")
    assert args is not None
    assert (args.steps, args.seconds, args.what_if, args.try_fixes, args.try_steps, args.sample_hz) == (
        30,
        5.0,
        False,
        True,
        12,
        100.0,
    )
    assert args.out == str(tmp_path / "r") and (tmp_path / "r").is_dir()


@pytest.mark.parametrize(
    ("line", "option"),
    [
        ("train.py", "a script"),
        ("-m pkg.train", "-m"),
        ("--nproc-per-node 2", "--nproc-per-node"),
        ("--nnodes 2", "--nnodes"),
        ("--live", "--live"),
    ],
)
def test_what_a_cell_cannot_take_is_refused_in_one_line(line, option):
    with pytest.raises(UserError) as err:
        parse_options(line)
    assert str(err.value).startswith(f"%%supplyline diagnoses the cell itself: {option} does not apply here")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--steps 0", "%%supplyline: argument --steps: must be at least 1, not 0"),
        ("--seconds nan", "%%supplyline: argument --seconds: 'nan' is not a finite number"),
        ('--out "unclosed', "%%supplyline: No closing quotation"),
        ("--bogus", "%%supplyline: unrecognized arguments: --bogus"),
    ],
)
def test_bad_input_is_one_line(line, message):
    with pytest.raises(UserError) as err:
        parse_options(line)
    assert str(err.value) == message


def test_help_lists_only_what_a_cell_takes(capsys):
    assert parse_options("--help") is None
    text = capsys.readouterr().out
    assert "--steps N" in text and "--try-steps N" in text
    for hidden in ("--live", "--nproc-per-node", "SCRIPT.py", "-m ..."):
        assert hidden not in text
    assert options_parser().prog == "%%supplyline"
