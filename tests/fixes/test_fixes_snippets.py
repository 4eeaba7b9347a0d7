"""The two-line changes the doctor shows, written against the user's own line."""

from __future__ import annotations

import ast
import textwrap

from supplyline.fixes.snippets import checkpoint_fix_snippet, logging_fix_snippet


def _added(snippet: str) -> list[str]:
    return [line[2:] for line in snippet.splitlines() if line.startswith("+ ")]


def test_checkpoint_snippet_reuses_the_users_state_folder_and_step():
    snippet = checkpoint_fix_snippet('        torch.save(model.state_dict(), f"runs/ckpt_{global_step}.pt")\n')
    assert _added(snippet) == [
        "from supplyline.fixes import AsyncCheckpointer",
        'checkpointer = AsyncCheckpointer("runs", keep_last=3)',
        "        checkpointer.save(model.state_dict(), step=global_step)",
    ]
    assert '-         torch.save(model.state_dict(), f"runs/ckpt_{global_step}.pt")' in snippet


def test_checkpoint_snippet_with_os_path_join_and_a_dict_state():
    line = '    torch.save({"m": model.state_dict(), "o": opt.state_dict()}, os.path.join(out_dir, f"e{epoch}.pt"))'
    added = _added(checkpoint_fix_snippet(line))
    assert added[1] == "checkpointer = AsyncCheckpointer(out_dir, keep_last=3)"
    assert added[2] == '    checkpointer.save({"m": model.state_dict(), "o": opt.state_dict()}, step=epoch)'


def test_checkpoint_snippet_on_an_unparsable_line_still_gives_valid_code():
    for line in ["torch.save(model.state_dict(),", "save_everything()"]:
        for code in _added(checkpoint_fix_snippet(line)):
            ast.parse(code.strip())


def test_logging_snippet_after_setup_line():
    snippet = logging_fix_snippet('logging.basicConfig(filename="train.log", level=logging.INFO)')
    assert _added(snippet) == ["from supplyline.fixes import async_logging", "async_logging()"]
    assert "right after your logging set-up" in snippet


def test_logging_snippet_moves_item_out_of_every_step():
    snippet = logging_fix_snippet('        logger.info(f"step {step} loss {loss.item():.4f}")')
    added = _added(snippet)
    assert "from supplyline.fixes import async_logging" in added
    assert "        if log_every(loss):" in added
    assert '            logger.info(f"step {step} loss {log_every.mean:.4f}")' in added
    ast.parse(textwrap.dedent("\n".join(added[-2:])))  # the replacement is valid Python
