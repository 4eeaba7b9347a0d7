"""GPU reader: the real no-NVML path of this machine, and a fake NVML module through the seam."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from supplyline.collect.gpu import NO_GPU, GpuReader


class NVMLError(Exception):
    pass


class FakeNvml:
    """The pynvml functions the reader calls; device 1 lacks power and PCIe counters."""

    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, devices: int = 2) -> None:
        self.devices = devices
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return self.devices

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return f"Fake H{h}".encode()

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=97 - h, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(used=3 * 2**30, total=80 * 2**30, free=77 * 2**30)

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        if h == 1:
            raise NVMLError("Not Supported")
        return 2048 if counter == self.NVML_PCIE_UTIL_RX_BYTES else 1024

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return 1980

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        if h == 1:
            raise NVMLError("Not Supported")
        return 350_500

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return 61


def test_this_machine_has_no_nvml_and_says_so() -> None:
    reader = GpuReader()
    if reader.available:
        pytest.skip("this machine has an NVIDIA GPU")
    assert reader.reason.startswith(NO_GPU)
    assert reader.read() == []
    reader.close()


def test_fake_nvml_gives_every_field_in_its_unit() -> None:
    fake = FakeNvml()
    reader = GpuReader(nvml=fake)
    assert reader.available and reader.reason == ""
    first, second = reader.read()
    assert (first.index, first.name, first.util_pct, first.memory_util_pct) == (0, "Fake H0", 97.0, 40.0)
    assert first.memory_used_bytes == 3 * 2**30 and first.memory_total_bytes == 80 * 2**30
    assert (first.pcie_rx_mb_per_s, first.pcie_tx_mb_per_s) == (2.0, 1.0)  # KB/s -> MB/s
    assert (first.sm_clock_mhz, first.power_w, first.temperature_c) == (1980, 350.5, 61)
    # What a device does not support is None, not an error.
    assert second.pcie_rx_mb_per_s is None and second.power_w is None and second.util_pct == 96.0
    reader.close()
    assert fake.shutdowns == 1 and not reader.available


def test_init_failure_never_raises() -> None:
    class Broken(FakeNvml):
        def nvmlInit(self) -> None:
            raise NVMLError("Driver Not Loaded")

    reader = GpuReader(nvml=Broken())
    assert not reader.available
    assert reader.reason == f"{NO_GPU} (Driver Not Loaded)"


def test_no_devices_is_unavailable() -> None:
    fake = FakeNvml(devices=0)
    reader = GpuReader(nvml=fake)
    assert not reader.available and "no device" in reader.reason
    assert fake.shutdowns == 1
