"""The change a finding shows, written against the user's own source line.

The doctor calls these with the offending line it found (indentation included) and prints the
result: lines starting with ``-`` are the user's, ``+`` the replacement, ``#`` where to put it.

A ``-`` line is only ever written for a line that makes the call being fixed (a save, a print, a
log call): the line the sampler found may be the caller of a framework (``trainer.train()``), and
rewriting it would delete the training. A job run by a framework (frames in the Hugging Face
Trainer or in Lightning) gets the framework's own setting instead (``framework_of``).
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Literal

Framework = Literal["hf_trainer", "lightning", "plain"]
_SEP = os.sep
_HF_MARKERS = (f"{_SEP}transformers{_SEP}trainer.py", f"{_SEP}transformers{_SEP}trainer_")
_LIGHTNING_MARKERS = (f"{_SEP}lightning{_SEP}pytorch{_SEP}", f"{_SEP}pytorch_lightning{_SEP}")
_SAVE_CALLS = frozenset(
    {"save", "save_file", "save_model", "save_pretrained", "save_checkpoint", "async_save", "save_state_dict"}
)
_LOG_CALLS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})
_WRITE_CALLS = frozenset({"write", "writelines", "flush", "fsync", "fdatasync"})

_SETUP_CALL = re.compile(r"basicConfig|Handler\s*\(|addHandler|dictConfig|fileConfig")
# `loss.item()`, `out["loss"].item()`: the expression whose value is read on the host.
_ITEM_CALL = re.compile(r"([\w.]+(?:\[[^\]]*\])*)\.item\(\)")
_STEP_NAMES = ("global_step", "step", "iteration", "it", "epoch", "i")


def framework_of(frames: Iterable[str | Mapping[str, object]]) -> Framework:
    """Which framework runs the loop these frames are in: ``hf_trainer``, ``lightning`` or ``plain``.

    ``frames``: ``"file:line:function"`` strings (the record's stacks) or dicts with a ``file`` key
    (the record's line samples), in any order.
    """
    for frame in frames:
        path = str(frame.get("file", "")) if isinstance(frame, Mapping) else frame
        if any(m in path for m in _HF_MARKERS):
            return "hf_trainer"
        if any(m in path for m in _LIGHTNING_MARKERS):
            return "lightning"
    return "plain"


def calls_in(line: str) -> set[str]:
    """Names of the functions a source line calls (``torch.save(...)`` -> ``{"save"}``); empty
    when the line does not parse on its own (a continuation line, a bare ``for``)."""
    code = _split(line)[1].rstrip(":")
    for candidate in (code, code + ": pass"):  # `with torch.no_grad():`, `for x in f(y):`
        try:
            tree = ast.parse(candidate)
        except SyntaxError:
            continue
        return {_call_name(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return set()


def logging_fix_snippet(line: str, frames: Iterable[str | Mapping[str, object]] = ()) -> str:
    """The change that takes printing or logging off the training thread, for the line that does it.

    ``print`` gets ``async_stdout()``; ``logging`` calls get ``async_logging()``; a Trainer or
    Lightning job gets its ``logging_steps``/``log_every_n_steps``. When ``line`` also calls
    ``.item()``, adds the ``every`` change that moves that host-device sync out of every step.
    A line that neither prints nor logs is never rewritten."""
    framework = framework_of(frames)
    if framework == "hf_trainer":
        return hf_trainer_snippet(logging_steps=100)
    if framework == "lightning":
        return lightning_snippet(log_every_n_steps=100)
    indent, code = _split(line)
    calls = calls_in(code)
    if "print" in calls:
        return print_fix_snippet(line)
    if not (calls & (_LOG_CALLS | _WRITE_CALLS) or _SETUP_CALL.search(code)):
        return _async_logging_setup()
    parts = ["# once, at the top of the script:", "+ from supplyline.fixes import async_logging"]
    if _SETUP_CALL.search(code):
        parts += ["# right after your logging set-up:", f"  {indent}{code}", f"+ {indent}async_logging()"]
    else:
        parts += [
            "# once, after your logging set-up and before the training loop:",
            "+ async_logging()",
            f"# {code} now only enqueues; a background thread writes it",
        ]
    return "\n".join(parts + _every_change(indent, code))


def print_fix_snippet(line: str) -> str:
    """``print`` to a slow terminal or pipe: make stdout/stderr writes asynchronous (``async_stdout``)."""
    indent, code = _split(line)
    parts = [
        "# once, at the top of the script (before the training loop):",
        "+ from supplyline.fixes import async_stdout",
        "+ async_stdout()",
        f"# {code} now only enqueues; a background thread writes to the terminal or pipe, in order,",
        "# and everything is written out at exit, on SIGTERM and on Ctrl-C",
    ]
    return "\n".join(parts + _every_change(indent, code))


def _every_change(indent: str, code: str) -> list[str]:
    synced = _ITEM_CALL.search(code)
    if not synced:
        return []
    value = synced.group(1)
    return [
        "# and read the value once per 100 steps instead of syncing with the GPU every step:",
        "+ from supplyline.fixes import every",
        "+ log_every = every(n_steps=100)   # before the loop",
        f"- {indent}{code}",
        f"+ {indent}if log_every({value}):",
        f"+ {indent}    {_ITEM_CALL.sub('log_every.mean', code)}",
    ]


def _async_logging_setup() -> str:
    """The change when the line found is not the log call itself: nothing of the user's is removed."""
    return "\n".join(
        [
            "# once, at the top of the script:",
            "+ from supplyline.fixes import async_logging, async_stdout",
            "# after your logging set-up and before the training loop:",
            "+ async_logging()   # logging handlers run on a background thread",
            "+ async_stdout()    # print() and other stdout/stderr writes too",
        ]
    )


def checkpoint_fix_snippet(
    line: str, frames: Iterable[str | Mapping[str, object]] = (), every_steps: int | None = None
) -> str:
    """The change that takes a blocking checkpoint save off the training thread.

    A plain loop gets ``AsyncCheckpointer`` with ``line`` rewritten when ``line`` is the save call,
    and without any removed line when it is not. A Trainer or Lightning job (``frames``) gets the
    framework's setting; ``every_steps`` is the cadence the doctor measured, if known."""
    framework = framework_of(frames)
    if framework == "hf_trainer":
        return hf_trainer_snippet(save_steps=max(10 * (every_steps or 50), 500), was_every=every_steps)
    if framework == "lightning":
        return lightning_snippet(async_checkpoint=True, every_n_train_steps=max(10 * (every_steps or 50), 500))
    indent, code = _split(line)
    setup = [
        "# once, before the training loop:",
        "+ from supplyline.fixes import AsyncCheckpointer",
    ]
    if not calls_in(code) & _SAVE_CALLS:
        return "\n".join(
            [
                *setup,
                '+ checkpointer = AsyncCheckpointer("checkpoints", keep_last=3)',
                "# in the loop, in place of your blocking torch.save(state, path) call:",
                "+ checkpointer.save(state, step=step)",
            ]
        )
    state, directory, step = _parse_save(code)
    return "\n".join(
        [
            *setup,
            f"+ checkpointer = AsyncCheckpointer({directory}, keep_last=3)",
            "# in the loop, instead of the blocking save:",
            f"- {indent}{code}",
            f"+ {indent}checkpointer.save({state}, step={step})",
        ]
    )


def save_less_often_snippet(
    line: str, guard: str = "", frames: Iterable[str | Mapping[str, object]] = (), every_steps: int | None = None
) -> str:
    """The change that saves ten times less often, for saves that come faster than a background
    writer could hide them. ``guard`` is the user's line above the save that sets the cadence
    (``if step % 5 == 0:``), rewritten when it names ``every_steps``; without it the save gets one."""
    every = every_steps or 50
    less = 10 * every
    framework = framework_of(frames)
    if framework == "hf_trainer":
        return hf_trainer_snippet(save_steps=max(less, 500), was_every=every_steps)
    if framework == "lightning":
        return "\n".join(
            [
                "# save less often:",
                "+ from lightning.pytorch.callbacks import ModelCheckpoint",
                f"+ Trainer(..., callbacks=[ModelCheckpoint(every_n_train_steps={max(less, 500)})])",
            ]
        )
    g_indent, g_code = _split(guard)
    cadence = re.compile(rf"%\s*{every}\b")
    if every_steps and cadence.search(g_code):
        return "\n".join(
            [
                f"# save every {less} steps instead of every {every}:",
                f"- {g_indent}{g_code}",
                f"+ {g_indent}{cadence.sub(f'% {less}', g_code, count=1)}",
            ]
        )
    indent, code = _split(line)
    return "\n".join(
        [
            f"# save every {less} steps (every {every} now): guard the save with your step counter",
            f"- {indent}{code}",
            f"+ {indent}if step % {less} == 0:",
            f"+ {indent}    {code}",
        ]
    )


def dataloader_fix_snippet(
    frames: Iterable[str | Mapping[str, object]], num_workers: int, prefetch_factor: int | None = None
) -> str:
    """Parallel loading in the terms of whoever builds the DataLoader: the Trainer, Lightning, or the user."""
    framework = framework_of(frames)
    if framework == "hf_trainer":
        return hf_trainer_snippet(dataloader_num_workers=num_workers, dataloader_prefetch_factor=prefetch_factor)
    if framework == "lightning":
        return lightning_snippet(num_workers=num_workers, prefetch_factor=prefetch_factor)
    prefetch = f", prefetch_factor={prefetch_factor}" if prefetch_factor else ""
    return "\n".join(
        [
            "# where you build the training DataLoader:",
            f"+ DataLoader(..., num_workers={num_workers}{prefetch}, pin_memory=True, persistent_workers=True)",
        ]
    )


def hf_trainer_snippet(
    dataloader_num_workers: int | None = None,
    dataloader_prefetch_factor: int | None = None,
    save_steps: int | None = None,
    was_every: int | None = None,
    logging_steps: int | None = None,
) -> str:
    """The ``TrainingArguments`` settings that apply a fix in a Hugging Face Trainer job."""
    args: list[str] = []
    if dataloader_num_workers is not None:
        args += [
            f"dataloader_num_workers={dataloader_num_workers},",
            "dataloader_pin_memory=True,",
            "dataloader_persistent_workers=True,",
        ]
        if dataloader_prefetch_factor:
            args.append(f"dataloader_prefetch_factor={dataloader_prefetch_factor},")
    if save_steps is not None:
        was = f"   # was a checkpoint every {was_every} steps" if was_every else ""
        args += [
            f'save_strategy="steps", save_steps={save_steps},{was}',
            "save_only_model=True,   # if you do not resume from the optimizer/scheduler/RNG files",
        ]
    if logging_steps is not None:
        args.append(f"logging_steps={logging_steps},   # the Trainer prints/logs every logging_steps updates")
    return "\n".join(
        [
            "# the Trainer builds the loop: set it in your TrainingArguments",
            "  TrainingArguments(",
            *(f"+     {a}" for a in args),
            "      ...)",
        ]
    )


def lightning_snippet(
    num_workers: int | None = None,
    prefetch_factor: int | None = None,
    async_checkpoint: bool = False,
    every_n_train_steps: int | None = None,
    log_every_n_steps: int | None = None,
) -> str:
    """The Lightning settings that apply a fix: the DataLoader in the datamodule, the Trainer's plugins."""
    parts: list[str] = []
    if num_workers is not None:
        prefetch = f", prefetch_factor={prefetch_factor}" if prefetch_factor else ""
        parts += [
            "# in your LightningDataModule (or LightningModule) train_dataloader():",
            f"+ return DataLoader(..., num_workers={num_workers}{prefetch}, pin_memory=True, persistent_workers=True)",
        ]
    if async_checkpoint:
        parts += [
            "# write checkpoints on a background thread, and less often:",
            "+ from lightning.pytorch.plugins.io import AsyncCheckpointIO",
            "+ from lightning.pytorch.callbacks import ModelCheckpoint",
            "  Trainer(...,",
            "+     plugins=[AsyncCheckpointIO()],",
            f"+     callbacks=[ModelCheckpoint(every_n_train_steps={every_n_train_steps or 500})],",
            "  )",
        ]
    if log_every_n_steps is not None:
        parts += [
            "# log (and print the progress) less often:",
            f"+ Trainer(..., log_every_n_steps={log_every_n_steps})",
        ]
    return "\n".join(parts)


def _split(line: str) -> tuple[str, str]:
    stripped = line.rstrip("\n").rstrip()
    code = stripped.lstrip()
    return stripped[: len(stripped) - len(code)], code


def _parse_save(code: str) -> tuple[str, str, str]:
    """(state expression, directory expression, step expression) from a ``save(...)`` line;
    placeholders where the line does not parse or does not say."""
    fallback = ("state", '"checkpoints"', "step")
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return fallback
    call = next(
        (
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _call_name(node.func) in _SAVE_CALLS and node.args
        ),
        None,
    )
    if call is None:
        return fallback
    if _call_name(call.func) == "save_pretrained" and isinstance(call.func, ast.Attribute):
        # model.save_pretrained(out_dir): the receiver is the state, the argument the folder
        return f"{ast.unparse(call.func.value)}.state_dict()", ast.unparse(call.args[0]), _step_of(call.args[0])
    state = ast.get_source_segment(code, call.args[0]) or fallback[0]
    target = (
        call.args[1]
        if len(call.args) > 1
        else next((kw.value for kw in call.keywords if kw.arg in ("f", "checkpoint_id")), None)
    )
    return state, _directory_of(target), _step_of(target)


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _directory_of(target: ast.expr | None) -> str:
    """The folder the user saves into: a literal path's folder, or os.path.join's head."""
    if isinstance(target, ast.Call) and _call_name(target.func) == "join" and len(target.args) >= 2:
        head = [ast.unparse(arg) for arg in target.args[:-1]]
        return head[0] if len(head) == 1 else f"os.path.join({', '.join(head)})"
    literal = None
    if isinstance(target, ast.Constant) and isinstance(target.value, str):
        literal = target.value
    elif isinstance(target, ast.JoinedStr) and target.values and isinstance(target.values[0], ast.Constant):
        literal = str(target.values[0].value)  # f"ckpt/{step}.pt": the fixed head names the folder
    folder = os.path.dirname(literal) if literal else ""
    return json.dumps(folder) if folder else '"checkpoints"'


def _step_of(target: ast.expr | None) -> str:
    names = {node.id for node in ast.walk(target) if isinstance(node, ast.Name)} if target else set()
    for preferred in _STEP_NAMES:
        if preferred in names:
            return preferred
    return "step"
