"""Where a path lives: its mount, file system type, block device and what kind of storage that is.

Read from ``/proc/self/mountinfo`` (which names each mount's device number) and ``/sys/dev/block``
(rotational flag, readahead, NVMe/virtio/device-mapper). Nothing here needs root.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from typing import Any

import psutil

NETWORK_FS = {
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "lustre",
    "gpfs",
    "beegfs",
    "ceph",
    "glusterfs",
    "9p",
    "afs",
    "ocfs2",
    "panfs",
    "wekafs",
    "orangefs",
    "pvfs2",
}
MEMORY_FS = {"tmpfs", "ramfs", "devtmpfs"}
# Views of the kernel, not storage: their files have no size (st_size 0 or 4096), reads are
# generated on the fly, and O_DIRECT or page-cache questions have no meaning there.
PSEUDO_FS = {
    "proc",
    "sysfs",
    "devpts",
    "cgroup",
    "cgroup2",
    "debugfs",
    "tracefs",
    "securityfs",
    "configfs",
    "pstore",
    "bpf",
    "mqueue",
    "binfmt_misc",
    "fusectl",
    "efivarfs",
    "nsfs",
    "autofs",
    "rpc_pipefs",
}


@dataclass
class Location:
    """Storage under a path. ``kind`` is one of: nvme, ssd, hdd, virtual-disk, network, fuse,
    memory, overlay, unknown."""

    mount_point: str
    fs_type: str
    source: str
    device: str | None  # block device name such as "nvme0n1" or "vda", None for network/memory
    kind: str
    description: str
    rotational: bool | None
    read_ahead_kb: int | None
    ram_available_bytes: int
    shm_free_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Mount:
    mount_point: str
    fs_type: str
    source: str
    major: int
    minor: int


def locate(path: str) -> Location:
    mount = _mount_of(os.path.realpath(path))
    device, rotational, read_ahead_kb = _block_device(mount.major, mount.minor)
    kind, description = _classify(mount, device, rotational)
    try:
        shm_free: int | None = shutil.disk_usage("/dev/shm").free
    except OSError:
        shm_free = None
    return Location(
        mount_point=mount.mount_point,
        fs_type=mount.fs_type,
        source=mount.source,
        device=device,
        kind=kind,
        description=description,
        rotational=rotational,
        read_ahead_kb=read_ahead_kb,
        ram_available_bytes=psutil.virtual_memory().available,
        shm_free_bytes=shm_free,
    )


def pseudo_fs_of(path: str) -> tuple[str, str] | None:
    """(file system type, mount point) when ``path`` lies on a pseudo file system such as /proc."""
    mount = _mount_of(os.path.realpath(path))
    return (mount.fs_type, mount.mount_point) if mount.fs_type in PSEUDO_FS else None


def _mount_of(real_path: str) -> _Mount:
    """The mount whose mount point is the longest prefix of ``real_path`` (the last one wins on ties,
    as the kernel's most recent mount hides earlier ones)."""
    best: _Mount | None = None
    for mount in _mounts():
        mp = mount.mount_point
        inside = real_path == mp or real_path.startswith(mp.rstrip("/") + "/")
        if inside and (best is None or len(mp) >= len(best.mount_point)):
            best = mount
    return best or _Mount("/", "unknown", "unknown", 0, 0)


def _mounts() -> list[_Mount]:
    mounts: list[_Mount] = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return mounts
    for line in lines:
        # id parent major:minor root mount_point options [optional...] - fstype source superoptions
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 2:
            continue
        major, _, minor = fields[2].partition(":")
        mounts.append(_Mount(_unescape(fields[4]), rfields[0], _unescape(rfields[1]), int(major), int(minor)))
    return mounts


def _unescape(text: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal (\040 ...).
    return text.encode().decode("unicode_escape") if "\\" in text else text


def _block_device(major: int, minor: int) -> tuple[str | None, bool | None, int | None]:
    """Name, rotational flag and readahead of the whole disk behind device ``major:minor``."""
    sys_dir = f"/sys/dev/block/{major}:{minor}"
    if major == 0 or not os.path.exists(sys_dir):
        return None, None, None
    real = os.path.realpath(sys_dir)
    name = os.path.basename(real)
    # A partition's queue/ lives on its parent disk.
    disk_dir = real if os.path.exists(os.path.join(real, "queue")) else os.path.dirname(real)
    # Device-mapper/md: the queue flags of the first underlying disk say more about the hardware.
    slaves = os.path.join(disk_dir, "slaves")
    hardware_dir = disk_dir
    if os.path.isdir(slaves) and os.listdir(slaves):
        under = os.path.realpath(os.path.join(slaves, sorted(os.listdir(slaves))[0]))
        hardware_dir = under if os.path.exists(os.path.join(under, "queue")) else os.path.dirname(under)
    rotational = _read_int(os.path.join(hardware_dir, "queue", "rotational"))
    read_ahead = _read_int(os.path.join(disk_dir, "queue", "read_ahead_kb"))
    return name, (None if rotational is None else rotational == 1), read_ahead


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _classify(mount: _Mount, device: str | None, rotational: bool | None) -> tuple[str, str]:
    fs = mount.fs_type
    base_fs = fs.split(".")[0]
    if base_fs in NETWORK_FS or fs.startswith("nfs"):
        return "network", f"network file system ({fs} from {mount.source})"
    if base_fs == "fuse" or fs == "fuseblk":
        return "fuse", f"FUSE file system ({fs} from {mount.source}): every read crosses user space"
    if fs in MEMORY_FS:
        return "memory", f"memory file system ({fs}): reads come from RAM"
    if fs == "overlay" and device is None:
        return "overlay", "overlay file system (container layer) over an unknown device"
    if device is None:
        return "unknown", f"{fs} on {mount.source} (no block device found)"
    hw = _hardware_of(device)
    if device.startswith("nvme"):
        return "nvme", f"NVMe SSD {device} ({fs})"
    if device.startswith("zram") or device.startswith("loop"):
        return "virtual-disk", f"{device} ({fs}): a {'compressed RAM' if device.startswith('zram') else 'loop'} device"
    if hw == "virtio" or device.startswith(("vd", "xvd")):
        # Hypervisors often report virtual disks as rotational; the flag says nothing about the host.
        flag = "reports rotational" if rotational else "reports non-rotational"
        return "virtual-disk", f"virtual disk {device} ({fs}, {flag}; the host's storage decides its speed)"
    if rotational:
        return "hdd", f"rotational disk {device} ({fs}): random small reads cost a seek each"
    return "ssd", f"SSD {device} ({fs})"


def _hardware_of(device: str) -> str:
    try:
        real = os.path.realpath(f"/sys/block/{device}/device")
    except OSError:
        return ""
    return "virtio" if "virtio" in real else ""
