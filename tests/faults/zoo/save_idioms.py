"""A training job that touches its checkpoints right after saving, the way real training code does.

Usage: save_idioms.py CKPT_DIR UPLOAD_DIR [STEPS] [SAVE_EVERY] [MB] [CRASH_AT]. Every SAVE_EVERY steps it
saves an MB-sized state (4 MB by default) and, before such a save could be on disk if it were written in
the background:
- timm's CheckpointSaver: torch.save to tmp.pth.tar, os.path.exists + os.unlink of last.pth.tar, os.replace
  tmp -> last, then os.link (or shutil.copyfile) to checkpoint-N.pth.tar;
- keep-last-2 rotation: glob + sorted + os.remove;
- a log line with os.path.getsize;
- shutil.copy to model_best.pth.tar and pathlib's stat/read_bytes;
- an upload by a child process (`cp` in subprocess.run) and os.system;
- torch.load to verify the tensors;
- save-then-remove of a scratch file;
- a folder listing (os.listdir, os.scandir) to "resume" from;
- safetensors' save_file beside them.
The saved states depend only on the step number, so the files are the same under any tool that does
not change what the script computes. It prints one line per save and exits 0, or raises.
"""

import glob
import os
import pathlib
import shutil
import subprocess
import sys

import torch

ckpt, upload = sys.argv[1], sys.argv[2]
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 30
every = int(sys.argv[4]) if len(sys.argv) > 4 else 3
megabytes = float(sys.argv[5]) if len(sys.argv) > 5 else 4.0
crash_at = int(sys.argv[6]) if len(sys.argv) > 6 else 0

torch.manual_seed(0)
model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(256, 64), torch.randint(0, 8, (256,)))
loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=False)


def state_for(step: int) -> dict:
    g = torch.Generator().manual_seed(step)
    return {"step": step, "weights": torch.randn(int(megabytes * 2**18), generator=g), "meta": {"epoch": step // 10}}


def timm_save(step: int) -> None:
    tmp = os.path.join(ckpt, "tmp.pth.tar")
    last = os.path.join(ckpt, "last.pth.tar")
    torch.save(state_for(step), tmp)
    if os.path.exists(last):
        os.unlink(last)
    os.replace(tmp, last)
    named = os.path.join(ckpt, f"checkpoint-{step}.pth.tar")
    try:
        os.link(last, named)
    except OSError:
        shutil.copyfile(last, named)
    for old in sorted(glob.glob(os.path.join(ckpt, "checkpoint-*.pth.tar")), key=os.path.getmtime)[:-2]:
        os.remove(old)
    print(f"step {step}: saved {os.path.getsize(last)} bytes", flush=True)


def other_idioms(step: int) -> None:
    best = os.path.join(ckpt, "model_best.pth.tar")
    torch.save(state_for(step), best + ".new")
    shutil.copy(best + ".new", best)
    os.remove(best + ".new")
    assert pathlib.Path(best).stat().st_size == len(pathlib.Path(best).read_bytes())
    torch.save(state_for(step), os.path.join(ckpt, "upload.pt"))
    subprocess.run(["cp", os.path.join(ckpt, "upload.pt"), os.path.join(upload, f"up-{step}.pt")], check=True)
    torch.save(state_for(step), os.path.join(ckpt, "verify.pt"))
    back = torch.load(os.path.join(ckpt, "verify.pt"))
    assert back["step"] == step and torch.equal(back["weights"], state_for(step)["weights"])
    scratch = os.path.join(upload, "scratch.pt")
    torch.save(state_for(step), scratch)
    os.remove(scratch)
    torch.save(state_for(step), os.path.join(ckpt, "sys.pt"))
    assert os.system(f"test -s {os.path.join(ckpt, 'sys.pt')}") == 0
    torch.save({"step": step}, os.path.join(ckpt, "resume.pt"))
    names = sorted(os.listdir(ckpt))
    assert "resume.pt" in names and "tmp.pth.tar" not in names, names
    assert any(e.name == "resume.pt" for e in os.scandir(ckpt))
    from safetensors.torch import save_file

    save_file({"w": state_for(step)["weights"][:4096].clone()}, os.path.join(ckpt, "model.safetensors"))


step = 0
for _epoch in range(100):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step == crash_at:
            raise RuntimeError(f"planted failure at step {step}")
        if step % every == 0:
            timm_save(step)
            other_idioms(step)
        if step >= steps:
            break
    if step >= steps:
        break
print("done", flush=True)
