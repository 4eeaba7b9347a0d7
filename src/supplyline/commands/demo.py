"""``supplyline demo``: the monitor around a bundled small CPU training job, then its summary.

Interim: the doctor issue switches the demo to diagnosing a bundled script; ``BUNDLED_DEMO`` is
the script's path for reuse.
"""
from __future__ import annotations

import argparse
import os
import sys

from supplyline.commands.monitor import monitor_command

NAME = "demo"
HELP = "Run the monitor around a bundled small training job (a tiny CNN, 2 DataLoader workers, ~10 s)."
BUNDLED_DEMO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bundled", "demo_train.py")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=8.0, help="training time of the bundled job (default 8)")
    parser.add_argument("--interval", type=float, default=0.5, metavar="S", help="seconds between samples")
    parser.add_argument("--log", metavar="FILE.jsonl", help="also write every sample as a JSON line")


def run(args: argparse.Namespace) -> int:
    command = [sys.executable, BUNDLED_DEMO, "--seconds", str(args.seconds), "--workers", "2"]
    return monitor_command(command, args.interval, args.log, None,
                           title="demo: tiny CNN, 2 DataLoader workers")
