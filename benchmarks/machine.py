"""The machine a benchmark ran on: CPU, RAM, kernel, disk and filesystem, Python and libraries."""

from __future__ import annotations

import datetime
import os
import platform
from importlib import metadata
from pathlib import Path

from benchmarks.records import Machine
from modelmon.core.system import RETURNS_FREE_MEMORY, memory_facts, storage_facts

LIBRARIES = (
    "numpy",
    "safetensors",
    "gguf",
    "torch",
    "runai-model-streamer",
    "fastsafetensors",
    "cattensors",
    "matplotlib",
)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _disk_model(device: str | None) -> str | None:
    if not device:
        return None
    model = Path(f"/sys/block/{device}/device/model")
    size = Path(f"/sys/block/{device}/size")
    parts = [
        model.read_text().strip() if model.exists() else "",
        f"{int(size.read_text()) * 512 / 1e9:.0f} GB" if size.exists() else "",
    ]
    return ", ".join(p for p in parts if p) or None


def _versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def facts(folder: Path) -> Machine:
    """Facts about this machine and the storage under ``folder`` (where the models live)."""
    storage = storage_facts(folder)
    memory = memory_facts()
    return Machine(
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        cpu=_cpu_model(),
        cores=os.cpu_count() or 1,
        ram_gib=round(memory.total / (1 << 30), 1),
        kernel=platform.release(),
        os=_os_name(),
        python=platform.python_version(),
        filesystem=storage.fs_type,
        disk=storage.description,
        disk_size=_disk_model(storage.block_device),
        libraries=_versions(),
        free_memory=RETURNS_FREE_MEMORY if memory.returns_free_memory else "kept by the guest",
        idle_memory=memory.proactive_reclaim or "kept (no proactive reclaim found)",
    )


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()
