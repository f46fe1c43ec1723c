"""Run:ai's streamer as N ranks of one job on this machine, as a tensor-parallel server's
workers run it: part of the child harness (``child.py``), plain Python that never imports
modelmon.

The harness is rank 0. Before its clock starts (``Ranks.start``) it starts ranks 1..N-1,
each a process of its own (this file, run by path), and they join one torch.distributed
group over gloo, the CPU backend, through a TCP store on loopback; then all wait at a
barrier, as a server's workers are up before they load. Every rank streams every file with
``is_distributed=True``, as vLLM's workers call it, so ``RUNAI_STREAMER_DIST`` decides what
happens: ``1``: the ranks share the reads (each reads a part and broadcasts it to the
others); unset (``auto``) or ``0``: each rank reads the whole model itself (``auto``
distributes over NCCL only). Every rank touches every byte it got and waits at a second
barrier; the load ends there, and rank 0 reports the least any rank touched, so a rank that
got part of the model makes the load partial.

A rank that fails ends the harness with its exit code and its last line on stderr; every
rank dies with its parent, and every wait on the group has a time limit.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # run by path, the harness's siblings are plain modules
    from modelmon.core.loaders.child_touch import touch_tensors
else:
    from child_touch import touch_tensors

HOST = "127.0.0.1"  # the ranks meet on loopback only
GROUP_TIMEOUT_S = 300.0  # the longest a rank waits for the others at any step
POLL_S = 0.1  # how often rank 0 looks at the other ranks while they run
PR_SET_PDEATHSIG = 1


def stream(files: list[str]) -> list[Any]:
    """Every tensor of ``files``, streamed as this rank of the group (owned copies)."""
    streamer = importlib.import_module("runai_model_streamer")
    kept: list[Any] = []
    with streamer.SafetensorsStreamer() as streaming:
        streaming.stream_files(files, device="cpu", is_distributed=True)
        kept.extend(tensor for _, tensor in streaming.get_tensors())
    return kept


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def _join(store: Any, rank: int, world: int) -> Any:
    dist = importlib.import_module("torch.distributed")
    timeout = timedelta(seconds=GROUP_TIMEOUT_S)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    dist.barrier()  # every rank up: the load starts
    return dist


class Ranks:
    """Ranks 1..N-1 of a load, started by rank 0 (the harness), and the group they share."""

    def __init__(self, files: list[str], world: int) -> None:
        self.files, self.world = files, world
        self.errors: list[IO[bytes]] = []  # each rank's stderr, for its last line
        self.processes: list[subprocess.Popen[bytes]] = []
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        """Start the other ranks and join them in the group, at its first barrier."""
        dist = importlib.import_module("torch.distributed")
        timeout = timedelta(seconds=GROUP_TIMEOUT_S)
        store = dist.TCPStore(
            HOST, 0, self.world, is_master=True, timeout=timeout, wait_for_workers=False
        )
        for rank in range(1, self.world):
            err = tempfile.TemporaryFile()  # noqa: SIM115 (open while the rank runs)
            self.errors.append(err)
            command = [sys.executable, os.path.abspath(__file__), str(rank), str(self.world)]
            self.processes.append(
                subprocess.Popen(
                    [*command, str(store.port), *self.files],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )
        self._watcher = threading.Thread(target=self._watch, name="ranks", daemon=True)
        self._watcher.start()
        self.dist = _join(store, 0, self.world)
        self.store = store

    def _watch(self) -> None:
        """A rank that dies ends the harness: the others would wait for it at a barrier."""
        while not self._done.wait(POLL_S):
            for rank, process in enumerate(self.processes, start=1):
                code = process.poll()
                if code is not None and code != 0:
                    said = _last_line(self.errors[rank - 1])
                    sys.stderr.write(f"modelmon engine runai: rank {rank} of {self.world} ")
                    sys.stderr.write(f"exited with code {code}{': ' + said if said else ''}\n")
                    sys.stderr.flush()
                    os._exit(1)

    def load(self) -> tuple[int, int, list[dict[str, Any]]]:
        """Rank 0's load, once every rank has touched all it got: (the least any rank
        touched, rank 0's tensors, each other rank's report). The ranks end after it
        (``end``), off its clock."""
        kept = stream(self.files)
        touched, tensors = touch_tensors(iter(kept))
        self.dist.barrier()  # every rank loaded, touched and reported: the load ends
        reports = [json.loads(self.store.get(f"report{r}")) for r in range(1, self.world)]
        _keep.append(kept)
        least = min([touched, *(int(r["bytes"]) for r in reports)])
        return least, tensors, reports

    def end(self) -> None:
        """Leave the group and wait for the other ranks to end (each killed past the time
        limit), once the harness has reported."""
        self._done.set()  # a rank's exit from here on is no failure of the load
        self.dist.destroy_process_group()
        for process in self.processes:
            try:
                process.wait(GROUP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


_keep: list[Any] = []  # rank 0's tensors, alive until the harness has reported


def _last_line(stream: IO[bytes]) -> str:
    stream.seek(0)
    lines = [line for line in stream.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


def rank_main(argv: list[str]) -> int:
    """One of ranks 1..N-1: join, load, touch, wait for the others, report."""
    rank, world, port, files = int(argv[0]), int(argv[1]), int(argv[2]), argv[3:]
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        return 1
    dist = importlib.import_module("torch.distributed")
    importlib.import_module("runai_model_streamer")
    timeout = timedelta(seconds=GROUP_TIMEOUT_S)
    store = dist.TCPStore(HOST, port, world, is_master=False, timeout=timeout)
    _join(store, rank, world)
    start = time.perf_counter()
    kept = stream(files)
    touched, tensors = touch_tensors(iter(kept))
    seconds = time.perf_counter() - start
    report = {"rank": rank, "bytes": touched, "tensors": tensors, "seconds": seconds}
    store.set(f"report{rank}", json.dumps({**report, "peak_rss": _status_bytes("VmHWM:")}))
    dist.barrier()  # rank 0's load ends here
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    # Its own folder stays off the import path, where it would shadow a library's module.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.exit(rank_main(sys.argv[1:]))
