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


# -- fixes that apply to the code they name -------------------------------------------------------
HF_STACK = [
    "/venv/lib/python3.12/site-packages/transformers/trainer.py:3572:_save_optimizer_and_scheduler",
    "/venv/lib/python3.12/site-packages/transformers/trainer.py:2520:_inner_training_loop",
    "/home/u/train_hf.py:48:main",
]
LIGHTNING_STACK = [
    {"file": "/venv/lib/python3.12/site-packages/lightning/pytorch/loops/fit_loop.py"},
    {"file": "/home/u/train_pl.py"},
]


def test_framework_of_reads_the_stack():
    from supplyline.fixes.snippets import framework_of

    assert framework_of(HF_STACK) == "hf_trainer"
    assert framework_of(LIGHTNING_STACK) == "lightning"
    assert (
        framework_of(["/venv/lib/python3.12/site-packages/pytorch_lightning/trainer/trainer.py:1:fit"]) == "lightning"
    )
    assert framework_of(["/home/u/train.py:10:main", "/venv/site-packages/torch/serialization.py:900:save"]) == "plain"
    assert framework_of([]) == "plain"
    # a user file merely named like a framework is not one
    assert framework_of(["/home/u/my_trainer.py:3:main"]) == "plain"


def test_checkpoint_snippet_never_rewrites_a_line_that_is_not_a_save():
    for line in ["    out = trainer.train()", "for batch in loader:", "save_everything()", "    loss.backward()"]:
        snippet = checkpoint_fix_snippet(line)
        assert not [x for x in snippet.splitlines() if x.startswith("- ")], snippet
        assert "+ checkpointer.save(state, step=step)" in snippet


def test_checkpoint_snippet_for_other_save_apis_on_the_line():
    added = _added(checkpoint_fix_snippet('    save_file(model.state_dict(), f"out/w_{step}.safetensors")'))
    assert added[1:] == [
        'checkpointer = AsyncCheckpointer("out", keep_last=3)',
        "    checkpointer.save(model.state_dict(), step=step)",
    ]
    added = _added(checkpoint_fix_snippet("        model.save_pretrained(os.path.join(run_dir, f'ckpt-{it}'))"))
    assert added[2] == "        checkpointer.save(model.state_dict(), step=it)"


def test_hf_trainer_job_gets_training_arguments_not_a_diff_of_its_train_call():
    snippet = checkpoint_fix_snippet("    out = trainer.train()", frames=HF_STACK, every_steps=5)
    assert "trainer.train()" not in snippet and "checkpointer" not in snippet
    assert "TrainingArguments(" in snippet and "save_steps=500," in snippet and "every 5 steps" in snippet
    assert "save_only_model=True" in snippet


def test_dataloader_snippets_per_framework():
    from supplyline.fixes.snippets import dataloader_fix_snippet

    hf = dataloader_fix_snippet(HF_STACK, num_workers=4, prefetch_factor=2)
    for arg in (
        "dataloader_num_workers=4",
        "dataloader_pin_memory=True",
        "dataloader_persistent_workers=True",
        "dataloader_prefetch_factor=2",
    ):
        assert arg in hf
    pl = dataloader_fix_snippet(LIGHTNING_STACK, num_workers=3)
    assert "train_dataloader()" in pl and "num_workers=3" in pl and "persistent_workers=True" in pl
    plain = dataloader_fix_snippet([], num_workers=2)
    assert "+ DataLoader(..., num_workers=2, pin_memory=True, persistent_workers=True)" in plain


def test_lightning_checkpoint_and_logging_snippets():
    ckpt = checkpoint_fix_snippet("        trainer.fit(model, dm)", frames=LIGHTNING_STACK, every_steps=10)
    assert "AsyncCheckpointIO()" in ckpt and "every_n_train_steps=500" in ckpt and "- " not in ckpt
    log = logging_fix_snippet("        trainer.fit(model, dm)", frames=LIGHTNING_STACK)
    assert "log_every_n_steps=100" in log
    assert "logging_steps=100" in logging_fix_snippet("trainer.train()", frames=HF_STACK)


def test_print_gets_async_stdout_not_async_logging():
    snippet = logging_fix_snippet('            print(f"[{epoch}/{n}][{i}] Loss_D: {errD.item():.4f}")')
    added = _added(snippet)
    assert added[:2] == ["from supplyline.fixes import async_stdout", "async_stdout()"]
    assert "async_logging" not in snippet
    assert '                print(f"[{epoch}/{n}][{i}] Loss_D: {log_every.mean:.4f}")' in added  # the .item() change


def test_logging_snippet_never_rewrites_a_line_that_does_not_log():
    snippet = logging_fix_snippet("    optimizer.zero_grad()")
    assert not [x for x in snippet.splitlines() if x.startswith("- ")]
    assert "async_stdout()" in snippet and "async_logging()" in snippet


def test_save_less_often_rewrites_the_users_cadence_line():
    from supplyline.fixes.snippets import save_less_often_snippet

    snippet = save_less_often_snippet(
        "        torch.save(state, path)", "    if step % 5 == 0:  # every 5", every_steps=5
    )
    assert snippet.splitlines() == [
        "# save every 50 steps instead of every 5:",
        "-     if step % 5 == 0:  # every 5",
        "+     if step % 50 == 0:  # every 5",
    ]
    # no cadence line found: the save gets a guard, and nothing says AsyncCheckpointer
    bare = save_less_often_snippet("    torch.save(state, path)", "", every_steps=4)
    assert "+     if step % 40 == 0:" in bare and "+         torch.save(state, path)" in bare
    assert "AsyncCheckpointer" not in bare + snippet
    # a cadence line of another period is not rewritten
    assert "- if step % 7" not in save_less_often_snippet("torch.save(s, p)", "if step % 7 == 0:", every_steps=5)
