"""NVIDIA GPUs through NVML (package ``nvidia-ml-py``, imported as ``pynvml``).

The seam is ``GpuReader(nvml=...)``: by default it imports ``pynvml``; tests hand it any object
with the same functions. Constructing a reader never raises: with no library, no driver or no
device it is ``available=False`` with a one-line ``reason`` that the caller says once.
Each field a device does not support is None rather than an error (nvitop's "N/A" sentinel).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from supplyline.collect.samples import GpuSample

NO_GPU = "no NVIDIA GPU/NVML"
_T = TypeVar("_T")


class GpuReader:
    """Reads every NVML device; ``available`` and ``reason`` say why there is nothing to read."""

    def __init__(self, nvml: Any = None) -> None:
        self.available = False
        self.reason = ""
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._names: list[str] = []
        try:
            if nvml is None:
                import pynvml as nvml  # type: ignore[no-redef]  # the module-level name was None: NVML absent at import
            nvml.nvmlInit()
        except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.reason = f"{NO_GPU} ({_describe(exc)})"
            return
        self._nvml = nvml
        try:
            count = int(nvml.nvmlDeviceGetCount())
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self._names = [
                _text(_try(partial(nvml.nvmlDeviceGetName, h)) or f"GPU {i}") for i, h in enumerate(self._handles)
            ]
        except Exception as exc:
            self.close()
            self.reason = f"{NO_GPU} ({_describe(exc)})"
            return
        if not self._handles:
            self.close()
            self.reason = f"{NO_GPU} (NVML found no device)"
            return
        self.available = True

    @property
    def device_names(self) -> list[str]:
        return list(self._names)

    def read(self) -> list[GpuSample]:
        """One sample per device; empty when unavailable. Never raises for an unsupported field."""
        if not self.available:
            return []
        return [self._read_device(i, h) for i, h in enumerate(self._handles)]

    def _read_device(self, index: int, handle: Any) -> GpuSample:
        nv = self._nvml
        util = _try(lambda: nv.nvmlDeviceGetUtilizationRates(handle))
        mem = _try(lambda: nv.nvmlDeviceGetMemoryInfo(handle))
        # NVML reports PCIe throughput in KB/s (1024 bytes), averaged over a 20 ms window.
        rx_kb = _try(lambda: nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_RX_BYTES))
        tx_kb = _try(lambda: nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_TX_BYTES))
        power_mw = _try(lambda: nv.nvmlDeviceGetPowerUsage(handle))
        return GpuSample(
            index=index,
            name=self._names[index],
            util_pct=_num(getattr(util, "gpu", None)),
            memory_util_pct=_num(getattr(util, "memory", None)),
            memory_used_bytes=_int(getattr(mem, "used", None)),
            memory_total_bytes=_int(getattr(mem, "total", None)),
            pcie_rx_mb_per_s=None if rx_kb is None else float(rx_kb) / 1024.0,
            pcie_tx_mb_per_s=None if tx_kb is None else float(tx_kb) / 1024.0,
            sm_clock_mhz=_int(_try(lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))),
            power_w=None if power_mw is None else float(power_mw) / 1000.0,
            temperature_c=_int(_try(lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU))),
        )

    def close(self) -> None:
        if self._nvml is not None:
            _try(self._nvml.nvmlShutdown)
            self._nvml = None
        self.available = False
        self._handles = []


def _try(call: Callable[[], _T]) -> _T | None:
    # NVMLError_NotSupported and friends: the field is unknown on this device, not a failure.
    try:
        return call()
    except Exception:
        return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ImportError):
        return "pynvml is not installed: pip install nvidia-ml-py"
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
