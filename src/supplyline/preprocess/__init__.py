"""``supplyline preprocess``: where each sample's CPU time goes — per transform, per line, inside
workers — and whether the GIL holds it. ``profile_dataset`` is the entry point for other commands."""

from supplyline.preprocess.api import Target, profile_dataset
from supplyline.preprocess.report import PreprocessReport

__all__ = ["PreprocessReport", "Target", "profile_dataset"]
