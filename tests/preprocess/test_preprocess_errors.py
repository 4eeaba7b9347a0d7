"""Bad samples and bad input: one index raising is reported and the rest measured; bad targets give one line."""

from __future__ import annotations

import pytest

from supplyline.errors import UserError
from supplyline.preprocess import profile_dataset


def test_raising_index_is_reported_with_traceback_and_the_rest_measured(dsmod, quick):
    report = quick(dsmod.Raising(), samples=12)
    assert [e.index for e in report.errors] == [dsmod.Raising.BAD]
    error = report.errors[0]
    assert error.error == "ValueError: corrupt record 3"
    assert 'raise ValueError(f"corrupt record {i}")' in error.traceback
    assert error.location.function == "__getitem__" and error.location.file == dsmod.__file__
    assert report.getitem.count == 11 and dsmod.Raising.BAD not in [i for i, _ in report.getitem.slowest]
    assert report.profile.samples == 11
    assert report.suggestions[0].kind == "error" and "indices 3" in report.suggestions[0].measured


def test_dataset_raising_everywhere_still_returns_a_report(quick):
    class AlwaysBroken:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            raise KeyError(i)

    report = quick(AlwaysBroken())
    assert len(report.errors) == 3 and report.getitem.count == 0
    assert "every sample raised" in report.notes[0]


def test_unpicklable_dataset_is_measured_in_the_main_process(dsmod, quick):
    report = quick(dsmod.NotPicklable(), samples=12, workers=2, start_method="spawn")
    assert report.workers is None
    assert any("cannot be pickled" in n and "main process" in n for n in report.notes)
    assert report.getitem.count == 12 and report.profile.samples == 12


@pytest.mark.parametrize(
    "obj, message",
    [
        (42, "not a dataset"),
        ("abc", None),  # a str has __getitem__ and __len__: duck-typed datasets are accepted
    ],
)
def test_not_a_dataset(obj, message, quick):
    if message is None:
        assert quick(obj, samples=3).getitem.count == 3
        return
    with pytest.raises(UserError, match=message):
        profile_dataset(obj)


def test_empty_dataset(dsmod):
    with pytest.raises(UserError, match="empty"):
        profile_dataset(dsmod.Empty())


BAD_INPUTS = [
    (["pp_datasets:NOT_A_DATASET"], "is a int, not a dataset"),
    (["pp_datasets:empty"], "is empty"),
    (["no_such_module_xyz:ds"], "cannot import 'no_such_module_xyz'"),
    (["pp_datasets:missing"], "has no attribute 'missing'"),
    (["pp_datasets"], "is not MODULE:ATTR"),
    (["pp_datasets:three_stages", "--samples", "0"], "--samples: must be at least 1"),
    (["pp_datasets:three_stages", "--transform-attr", "nope"], "no attribute 'nope'"),
]


@pytest.mark.parametrize("args, expected", BAD_INPUTS)
def test_bad_inputs_give_one_line_and_exit_2(args, expected, dataset_dir, dsmod, monkeypatch, capsys):
    from supplyline.cli import main

    monkeypatch.chdir(dataset_dir)
    assert main(["preprocess", *args]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == captured.err.strip().splitlines()[0]
    assert captured.err.startswith("supplyline preprocess: ") and expected in captured.err
    assert "Traceback" not in captured.out + captured.err


@pytest.mark.slow
def test_cli_bad_input_in_a_real_process(cli, dataset_dir):
    for args, expected in (BAD_INPUTS[0], BAD_INPUTS[2]):
        result = cli(["preprocess", *args], cwd=dataset_dir, timeout=120)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, (args, result.stderr)
        assert len(lines) == 1 and lines[0].startswith("supplyline preprocess: ") and expected in lines[0], lines
        assert "Traceback" not in result.stdout + result.stderr


def test_ctrl_c_keeps_what_was_measured(quick):
    class InterruptedAtFive:
        """Raises KeyboardInterrupt at index 5, as Ctrl-C during the timing pass would."""

        def __len__(self):
            return 20

        def __getitem__(self, i):
            if i == 5:
                raise KeyboardInterrupt
            return i

    report = quick(InterruptedAtFive(), samples=20, gil_check=True)
    assert report.interrupted
    assert report.getitem.count == 5 and report.indices[:5] == [0, 1, 2, 3, 4]
    assert report.profile is None and report.gil is None
    assert any("interrupted during timing" in n for n in report.notes)
