"""``supplyline demo``: the doctor on a bundled training script with a planted bottleneck.

The bundled job (``bundled/demo_train.py``) trains a tiny CNN whose dataset does real per-sample
CPU work, loaded with ``num_workers=0``: the classic starved trainer (docs/how-it-works.md). The doctor
should name it (input-bound, `dataloader` first) and predict the gain of more workers.
``--monitor`` runs the host monitor around the same job instead.
"""

from __future__ import annotations

import argparse
import os
import sys

NAME = "demo"
HELP = "diagnose a bundled training script with a planted bottleneck (about 20 s)"
BUNDLED_DEMO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bundled", "demo_train.py")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", default="supplyline-report", metavar="DIR", help="report directory (default: %(default)s)"
    )
    parser.add_argument("--steps", type=int, default=40, help="observed training steps (default: %(default)s)")
    parser.add_argument(
        "--details", action="store_true", help="print the doctor's full account instead of the one-screen summary"
    )
    parser.add_argument(
        "--monitor", action="store_true", help="run the host monitor around the job instead of the doctor"
    )
    parser.add_argument(
        "--seconds", type=float, default=8.0, help="with --monitor: training time of the job (default 8)"
    )
    parser.add_argument(
        "--interval", type=float, default=0.5, metavar="S", help="with --monitor: seconds between samples"
    )


def run(args: argparse.Namespace) -> int:
    if args.monitor:
        from supplyline.commands.monitor import monitor_command

        command = [sys.executable, BUNDLED_DEMO, "--seconds", str(args.seconds), "--workers", "2"]
        return monitor_command(command, args.interval, None, None, title="demo: tiny CNN, 2 DataLoader workers")
    # The doctor command called directly, not through cli.main: commands never import the entry point
    # that imports them (tests/test_layers.py).
    from supplyline.commands import doctor

    print(
        f"supplyline demo: diagnosing the bundled {os.path.basename(BUNDLED_DEMO)} (num_workers=0, "
        f"per-sample CPU work) for {args.steps} steps",
        file=sys.stderr,
    )
    parser = argparse.ArgumentParser(prog="supplyline doctor")
    doctor.add_arguments(parser)
    doctor_args = parser.parse_args(
        [
            "--out",
            args.out,
            "--steps",
            str(args.steps),
            "--what-if-steps",
            "10",
            *(["--details"] if args.details else []),
            BUNDLED_DEMO,
            "--workers",
            "0",
            "--seconds",
            "120",
        ]
    )
    return doctor.run(doctor_args)
