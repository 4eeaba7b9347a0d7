"""tune_command_for: the exact ``supplyline tune`` command for a live dataset object."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from supplyline.tune import tune_command_for
from supplyline.tune.locate import _importable_names


def test_a_module_attribute_is_named(ds_import: Path) -> None:
    mod = importlib.import_module("tune_ds")
    assert tune_command_for(mod.sleepy) == "supplyline tune tune_ds:sleepy"
    assert tune_command_for(mod.sleepy, batch_size=32) == "supplyline tune tune_ds:sleepy --batch-size 32"


def test_an_instance_made_by_a_no_argument_class_names_the_class(ds_import: Path) -> None:
    mod = importlib.import_module("tune_ds")
    fresh = mod.RaisesAt()  # not a module attribute itself; RaisesAt() needs no arguments
    assert tune_command_for(fresh) == "supplyline tune tune_ds:RaisesAt"


def test_an_object_nobody_can_import_gives_none(ds_import: Path) -> None:
    mod = importlib.import_module("tune_ds")
    assert tune_command_for(mod.Sleepy(n=5)) is None  # Sleepy() would not be this dataset (n=600)
    assert tune_command_for(object()) is None


def test_a_script_is_named_by_path_only_when_importing_it_is_safe(tmp_path: Path) -> None:
    guarded = tmp_path / "train.py"
    guarded.write_text(
        textwrap.dedent("""
        import torch
        ds = list(range(10))
        def make(): return ds
        if __name__ == "__main__":
            inner = 1
    """)
    )
    assert _importable_names(str(guarded)) == {"ds", "make"}
    unguarded = tmp_path / "train2.py"
    unguarded.write_text("ds = list(range(10))\nprint('training')\n")
    assert _importable_names(str(unguarded)) == set()  # importing it would run the training


@pytest.mark.slow
def test_a_dataset_in_a_running_script_is_found(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[2] / "src"
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(src)!r})
        import torch
        from supplyline.tune import tune_command_for
        class DS(torch.utils.data.Dataset):
            def __len__(self): return 4
            def __getitem__(self, i): return i
        ds = DS()
        if __name__ == "__main__":
            print(tune_command_for(ds))
    """)
    )
    proc = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "supplyline tune train.py:ds", proc.stderr
