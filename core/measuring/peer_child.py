"""One load by another loader (a "peer"), in a fresh process that never imports modelmon.

    python .../peer_child.py PEER FILE [FILE ...]    # the parent drives it (measuring/peers.py)
    python .../peer_child.py --check PEER            # importable here? prints ok / why

It is run by path, not with ``-m``, so the child imports no modelmon package at all; a
peer's settings (Run:ai's ``RUNAI_STREAMER_CONCURRENCY``...) arrive in its environment, as a
user would set them.

Protocol (line-based, on stdin/stdout): the child imports the library, then prints ``ready``
and waits for a line ``go`` (meanwhile the parent puts the page cache in the requested state,
as modelmon's runner does once its workers have started). It then loads every tensor of every
file and keeps them all (a load to RAM, like modelmon's default mode), touches every page of
every result, and prints one JSON line: bytes, seconds (from go to the last tensor), peak RSS.
Import and process start-up are not counted, as in modelmon. It dies with its parent (the
kernel's parent-death signal), so a parent killed mid-load leaves no orphan reading on.

Every byte must be touched, or a lazy mmap measures nothing: the libraries here copy every
byte into memory of their own (safetensors' numpy path, the Run:ai streamer's buffers,
fastsafetensors' pread bounce buffers); results that are lazy views of a mapping (the gguf
reader's memmaps, safetensors' torch path that cattensors wraps) are copied out first, as
modelmon's own ``library`` strategy does. Then one byte of every 4 KiB page is read, so any
page a library left unmapped would be read from storage and counted.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

PAGE = 4096
PEER_MODULES = {
    "safetensors": ("safetensors", "numpy"),
    "gguf-reader": ("gguf", "numpy"),
    "runai-model-streamer": ("torch", "runai_model_streamer"),
    "fastsafetensors": ("torch", "fastsafetensors"),
    "cattensors": ("torch", "safetensors", "cattensors"),
}


def high_water_rss() -> int:
    """This process's own peak RSS (VmHWM). Not ``ru_maxrss``: Linux carries that across
    fork and exec, so a child would report its parent's peak if that was higher."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def touch(tensor: Any) -> int:
    """Read one byte of every page of a numpy array or torch tensor; returns its bytes."""
    import numpy as np

    if isinstance(tensor, np.ndarray):
        flat = np.ascontiguousarray(tensor).reshape(-1).view(np.uint8)
        int(flat[::PAGE].sum(dtype=np.uint64))
        return int(flat.nbytes)
    torch = importlib.import_module("torch")
    data = tensor.contiguous().reshape(-1).view(torch.uint8)
    int(data[::PAGE].sum())
    return int(data.numel())


def _offset_order(path: str) -> list[str]:
    """Tensor names of a safetensors file in data order (as modelmon's ``library`` reads)."""
    with open(path, "rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
    header.pop("__metadata__", None)
    return sorted(header, key=lambda name: header[name]["data_offsets"][0])


def load_safetensors(files: list[str]) -> Iterator[Any]:
    from safetensors import safe_open

    for path in files:
        with safe_open(path, framework="numpy") as handle:
            for name in _offset_order(path):
                yield handle.get_tensor(name)


def load_gguf_reader(files: list[str]) -> Iterator[Any]:
    import numpy as np
    from gguf import GGUFReader

    for path in files:
        reader = GGUFReader(path)
        for tensor in reader.tensors:
            yield np.array(tensor.data)  # a copy: .data is a memmap view
        del reader


def load_runai(files: list[str]) -> Iterator[Any]:
    streamer_class = importlib.import_module("runai_model_streamer").SafetensorsStreamer
    with streamer_class() as streamer:
        streamer.stream_files(files)
        yield from (tensor for _, tensor in streamer.get_tensors())  # owned: ours to keep


def load_fastsafetensors(files: list[str]) -> Iterator[Any]:
    fastsafe_open = importlib.import_module("fastsafetensors").fastsafe_open
    with fastsafe_open(files, framework="pt", nogds=True) as handle:
        for name in handle.keys():  # noqa: SIM118 (not a dict)
            yield handle.get_tensor(name)


def load_cattensors(files: list[str]) -> Iterator[Any]:
    import safetensors

    cattensors = importlib.import_module("cattensors")

    cattensors.patch()  # safetensors.safe_open now warms the file (parallel reads) first
    try:
        for path in files:
            with safetensors.safe_open(path, framework="pt") as handle:
                for name in handle.keys():  # noqa: SIM118 (patched: offset order)
                    yield handle.get_tensor(name).clone()  # a mmap view: copy it out
    finally:
        cattensors.unpatch()


LOADERS: dict[str, Callable[[list[str]], Iterator[Any]]] = {
    "safetensors": load_safetensors,
    "gguf-reader": load_gguf_reader,
    "runai-model-streamer": load_runai,
    "fastsafetensors": load_fastsafetensors,
    "cattensors": load_cattensors,
}


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (as modelmon's workers do);
    a parent already gone: end now."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl here: stdin's end still stops it at go
        return
    if os.getppid() != parent:
        os._exit(1)


def import_peer(peer: str) -> None:
    for module in PEER_MODULES[peer]:
        importlib.import_module(module)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--check":
        try:
            import_peer(argv[1])
        except Exception as exc:  # any import failure is a skip reason, said in one line
            print(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}")
            return 1
        print("ok")
        return 0
    peer, files = argv[0], argv[1:]
    die_with_parent()
    os.environ.setdefault("RUNAI_STREAMER_LOG_LEVEL", "WARNING")
    import_peer(peer)
    rss_ready = high_water_rss()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    start = time.perf_counter()
    kept = []
    loaded = 0
    for tensor in LOADERS[peer](files):
        loaded += touch(tensor)
        kept.append(tensor)
    seconds = time.perf_counter() - start
    peak = high_water_rss()
    print(
        json.dumps(
            {
                "bytes": loaded,
                "seconds": seconds,
                "tensors": len(kept),
                "peak_rss": peak,
                "rss_ready": rss_ready,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
