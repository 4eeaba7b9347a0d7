"""The change a finding shows, written against the user's own source line.

The doctor calls these with the offending line it found (indentation included) and prints the
result: lines starting with ``-`` are the user's, ``+`` the replacement, ``#`` where to put it.
"""

from __future__ import annotations

import ast
import json
import os
import re

_SETUP_CALL = re.compile(r"basicConfig|Handler\s*\(|addHandler|dictConfig|fileConfig")
# `loss.item()`, `out["loss"].item()`: the expression whose value is read on the host.
_ITEM_CALL = re.compile(r"([\w.]+(?:\[[^\]]*\])*)\.item\(\)")
_STEP_NAMES = ("global_step", "step", "iteration", "it", "epoch", "i")


def logging_fix_snippet(line: str) -> str:
    """The two-line change that puts the logging behind a queue (``async_logging``).

    When ``line`` also calls ``.item()``, adds the ``every`` change that moves that host-device
    sync out of every step."""
    indent, code = _split(line)
    parts = ["# once, at the top of the script:", "+ from supplyline.fixes import async_logging"]
    if _SETUP_CALL.search(code):
        parts += ["# right after your logging set-up:", f"  {indent}{code}", f"+ {indent}async_logging()"]
    else:
        parts += [
            "# once, after your logging set-up and before the training loop:",
            "+ async_logging()",
            f"# {code} now only enqueues; a background thread writes it",
        ]
    synced = _ITEM_CALL.search(code)
    if synced:
        value = synced.group(1)
        parts += [
            "# and read the value once per 100 steps instead of syncing with the GPU every step:",
            "+ from supplyline.fixes import every",
            "+ log_every = every(n_steps=100)   # before the loop",
            f"- {indent}{code}",
            f"+ {indent}if log_every({value}):",
            f"+ {indent}    {_ITEM_CALL.sub('log_every.mean', code)}",
        ]
    return "\n".join(parts)


def checkpoint_fix_snippet(line: str) -> str:
    """The two-line change that replaces a blocking ``torch.save`` with ``AsyncCheckpointer``."""
    indent, code = _split(line)
    state, directory, step = _parse_save(code)
    return "\n".join(
        [
            "# once, before the training loop:",
            "+ from supplyline.fixes import AsyncCheckpointer",
            f"+ checkpointer = AsyncCheckpointer({directory}, keep_last=3)",
            "# in the loop, instead of the blocking save:",
            f"- {indent}{code}",
            f"+ {indent}checkpointer.save({state}, step={step})",
        ]
    )


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
            if isinstance(node, ast.Call) and _call_name(node.func).endswith("save") and node.args
        ),
        None,
    )
    if call is None:
        return fallback
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
