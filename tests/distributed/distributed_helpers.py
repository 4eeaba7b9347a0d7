"""Helpers shared by the distributed tests (a module of its own: several test folders have a conftest)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "zoo", "ddp_train.py")
SRC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "src")
HANG_GUARD_S = 240  # a subprocess timeout against hangs, not a performance limit


def child_env() -> dict[str, str]:
    """The children (torchrun, its ranks) find this checkout's supplyline even from another directory."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([SRC, *filter(None, [env.get("PYTHONPATH")])])
    env["OMP_NUM_THREADS"] = "1"
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(argv: Sequence[str], cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=HANG_GUARD_S)


def supplyline(*args: str) -> list[str]:
    return [sys.executable, "-m", "supplyline", *args]


def torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *args]


def load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
