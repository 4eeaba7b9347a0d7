"""Side-by-side measurements for ``supplyline preprocess``, printed as ratios (run once; timings are noisy).

    PYTHONPATH=src python benchmarks/preprocess_bench.py

1. cost of measuring: __getitem__ with the stage proxies installed vs plain, and under the line sampler
   (own time: wall minus time waiting for a CPU, so other jobs on the machine drop out);
2. what the python_loop suggestion is worth: the demo's per-pixel normalize vs its vectorized form;
3. the GIL check on pure-Python vs NumPy work (threads and processes vs one thread).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

import numpy as np

from supplyline.preprocess import chain as chain_mod
from supplyline.preprocess import gil, lines, schedclock


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


def blur(x):
    return (x + np.roll(x, 1, 0) + np.roll(x, 1, 1)) / 3


def scale(x):
    return x * 0.5


def clip(x):
    return np.clip(x, 0, 1)


class ArrayPipeline:
    """Three NumPy stages on a 256x256 float image: realistic per-stage costs of ~0.1-1 ms."""

    def __init__(self) -> None:
        self.image = np.random.default_rng(0).random((256, 256))
        self.transform = Compose([blur, scale, clip])

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i):
        return self.transform(self.image + i)


def py_sum(x):
    return x + sum(k * k for k in range(3000))


def py_list(x):
    return x + len([k % 7 for k in range(3000)])


class PythonPipeline:
    """Three pure-Python stages (~0.2-0.5 ms each): the sampler competes with them for the GIL."""

    def __init__(self) -> None:
        self.transform = Compose([py_sum, py_list, py_sum])

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i):
        return self.transform(i)


def loop_normalize(a):
    out = np.empty_like(a)
    for y in range(a.shape[0]):
        for x in range(a.shape[1]):
            out[y, x] = (a[y, x] - 127.5) / 64.0
    return out


def vector_normalize(a):
    return (a - 127.5) / 64.0


def own_ms(fn, arg) -> float:
    """Wall ms minus the time this thread waited for a CPU: other jobs on the machine drop out."""
    queued, start = schedclock.queue_wait_ns(), time.perf_counter_ns()
    fn(arg)
    return (time.perf_counter_ns() - start - (schedclock.queue_wait_ns() - queued)) / 1e6


def per_call_ms(fn, arg, repeats: int) -> float:
    return statistics.median(own_ms(fn, arg) for _ in range(repeats))


def getitem_ms(ds, rounds: int = 3) -> float:
    return statistics.median(own_ms(ds.__getitem__, i) for _ in range(rounds) for i in range(len(ds)))


def overheads(ds) -> None:
    # The CPU speed itself drifts several-fold here while other jobs run (shared caches, SMT
    # siblings), so modes are measured in short interleaved rounds and compared round by round.
    proxy_ratios, sampler_ratios, plains = [], [], []
    for n in range(15):
        results = {}
        for mode in ("plain", "proxied", "sampled")[n % 3 :] + ("plain", "proxied", "sampled")[: n % 3]:  # rotate order
            if mode == "plain":
                results[mode] = getitem_ms(ds, rounds=1)
            elif mode == "proxied":
                installed = chain_mod.install(ds, None)
                results[mode] = getitem_ms(ds, rounds=1)
                installed.restore()
            else:
                with lines.LineSampler(threading.get_ident()):
                    results[mode] = getitem_ms(ds, rounds=1)
        plains.append(results["plain"])
        proxy_ratios.append(results["proxied"] / results["plain"])
        sampler_ratios.append(results["sampled"] / results["plain"])
    print(
        f"{type(ds).__name__}.__getitem__ (median own time {statistics.median(plains):.3f} ms): with stage proxies "
        f"x{statistics.median(proxy_ratios):.3f}, under the 1 ms line sampler x{statistics.median(sampler_ratios):.3f} "
        f"(median of 15 paired rounds)"
    )


def main() -> None:
    for ds in (ArrayPipeline(), PythonPipeline()):
        overheads(ds)

    image = np.random.default_rng(0).integers(0, 255, (96, 96, 3)).astype(np.float32)
    slow, fast = per_call_ms(loop_normalize, image, 10), per_call_ms(vector_normalize, image, 200)
    print(f"per-pixel normalize {slow:.2f} ms vs vectorized {fast:.3f} ms: x{slow / fast:.0f} faster after the fix")

    class PurePython:
        def __getitem__(self, i):
            return sum(k * k for k in range(20000))

    class NumpySort:
        data = np.random.default_rng(0).random(300_000)

        def __getitem__(self, i):
            return float(np.sort(self.data)[0])

    for name, work in (("pure Python", PurePython()), ("NumPy sort", NumpySort())):
        start = time.perf_counter()
        work[0]
        report = gil.check_gil(work, [0], time.perf_counter() - start, 2, None, True)
        print(f"GIL check, {name}: {report.verdict}")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
