"""`supplyline doctor --nproc-per-node N ...`: start the job through torch's own launcher.

We run ``python -m torch.distributed.run [launcher options] -m supplyline doctor [doctor options]
SCRIPT ARGS``: torchrun starts the ranks (and the rendezvous across nodes), each rank runs the
doctor around the unchanged script. Nothing of ours travels between machines: the records meet
through ``torch.distributed`` or the filesystem (doctor/ranks.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

from supplyline.errors import UserError


def add_launcher_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("distributed (launches through torchrun; without these, run under torchrun yourself)")
    g.add_argument("--nproc-per-node", type=int, metavar="N", help="ranks on this machine (torchrun --nproc-per-node)")
    g.add_argument("--nnodes", default="1", metavar="N", help="machines in the job, or MIN:MAX (default: %(default)s)")
    g.add_argument("--node-rank", type=int, metavar="K", help="this machine's index (static rendezvous)")
    g.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="rendezvous address, needed with --nnodes > 1")
    g.add_argument("--rdzv-backend", default="c10d", metavar="NAME", help="rendezvous backend (default: %(default)s)")
    g.add_argument(
        "--rdzv-id", default="supplyline", metavar="ID", help="job id shared by all nodes (default: %(default)s)"
    )


def torchrun_argv(target: Any, out_dir: str, args: argparse.Namespace) -> list[str]:
    """The torchrun command line that re-invokes this doctor (with the same options) on every rank."""
    if args.nproc_per_node < 1:
        raise UserError("--nproc-per-node must be at least 1")
    if args.seconds is not None:
        raise UserError("with --nproc-per-node use --steps N, not --seconds: every rank must stop at the same step")
    multi = str(args.nnodes) not in ("1", "1:1")
    launcher = ["--nproc-per-node", str(args.nproc_per_node), "--nnodes", str(args.nnodes)]
    if multi:
        if not args.rdzv_endpoint:
            raise UserError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the address of the first node)")
        launcher += [
            "--rdzv-backend",
            args.rdzv_backend,
            "--rdzv-endpoint",
            args.rdzv_endpoint,
            "--rdzv-id",
            args.rdzv_id,
        ]
        if args.node_rank is not None:
            launcher += ["--node-rank", str(args.node_rank)]
    elif args.rdzv_endpoint:
        launcher += [
            "--rdzv-backend",
            args.rdzv_backend,
            "--rdzv-endpoint",
            args.rdzv_endpoint,
            "--rdzv-id",
            args.rdzv_id,
        ]
    else:
        launcher += ["--standalone"]
    doctor = ["--out", out_dir]
    if args.steps is not None:
        doctor += ["--steps", str(args.steps)]
    if not args.what_if:
        doctor += ["--no-what-if"]
    doctor += ["--what-if-steps", str(args.what_if_steps)]
    if args.quiet:
        doctor += ["--quiet"]
    job = ["-m", target.name, *target.args] if target.kind == "module" else ["--", target.name, *target.args]
    return [sys.executable, "-m", "torch.distributed.run", *launcher, "-m", "supplyline", "doctor", *doctor, *job]


def launch_ranks(target: Any, out_dir: str, args: argparse.Namespace) -> int:
    """Run the job under torchrun; afterwards make sure this node's DIR has a merged report."""
    argv = torchrun_argv(target, out_dir, args)
    started = time.time()
    try:
        code = subprocess.call(argv)
    except KeyboardInterrupt:  # torchrun forwards the signal to the ranks; they write what they measured
        code = 130
    _merge_if_missing(out_dir, started, args.quiet)
    return code


def _merge_if_missing(out_dir: str, started: float, quiet: bool) -> None:
    """If no rank merged (a crash, records split across nodes), merge here when every rank's record is here."""
    from supplyline.analyze.distributed import job_key, world_size
    from supplyline.doctor.merged import is_distributed_dir, load_rank_records, merge_dir, started_markers
    from supplyline.render.distributed import render_merged

    merged = os.path.join(out_dir, "report.json")
    if not is_distributed_dir(out_dir):
        return
    if os.path.exists(merged) and os.path.getmtime(merged) >= started:
        return
    try:
        records, _ = load_rank_records(out_dir)
        first = next(iter(records.values()))
        world = world_size(records)
        # torchrun has ended: a rank of this node that left a started marker and no record was killed
        killed = started_markers(out_dir, job_key(first))
        if len(records) + len([r for r in killed if r not in records]) < world:
            print(
                f"supplyline doctor: {out_dir} holds the records of ranks {sorted(records)} of {world}; the merged "
                f"report is on the node of rank 0, or copy every node's rank-K folders here and run "
                f"`supplyline merge {out_dir}`",
                file=sys.stderr,
            )
            return
        report = merge_dir(out_dir)
    except UserError as exc:
        print(f"supplyline doctor: {exc}", file=sys.stderr)
        return
    if not quiet:
        render_merged(report, out_dir)
