"""Fixes applied in-process to an unchanged training script, and taken back afterwards.

Each applier installs reversible patches (``supplyline.collect.patching.Patcher``) and has an
``uninstall``/``finish`` that puts everything back and drains what it handed to a background
thread. ``supplyline run --apply`` uses them for a whole job; the doctor's fix trials reuse them
for a labelled phase of one.

- ``spec``: what to change (``num_workers=2,async_logging``), parsed or taken from a saved report.
- ``loader``: DataLoader settings at construction, and a rebuilt loader for a live one.
- ``writes``: print, logging handlers and ``fsync`` handed to one background writer thread.
- ``checkpoint``: ``torch.save`` / DCP save snapshotted on the call, written in the background.

This package imports torch only in the modules that need it; ``spec`` is torch-free.
"""
