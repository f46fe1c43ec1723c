"""The child side of a ``LoadRun``: one worker process's entry point, ``worker_main``.

It opens its own descriptors, runs one strategy on its share of the tensors and reports in
small batches; the parent (``loading.runner.LoadRun``) starts, times and stops it. Never
called by anything but ``LoadRun``. ``build_context`` is also used by in-process loads.

Imported by ``spawn`` children: it must stay free of Qt (and of anything heavy it doesn't use).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle
from typing import Any

from modelmon.core.errors import LoadCancelled, LoadError, StorageError, one_line
from modelmon.core.loading.drop_behind import DropBehind
from modelmon.core.loading.handout import Handout
from modelmon.core.loading.messages import WorkerDone, WorkerFailed, WorkerReady
from modelmon.core.loading.reads import ReadRecorder, now_ns
from modelmon.core.loading.shared_copy import SharedCopy
from modelmon.core.loading.sharing import RunMemory
from modelmon.core.loading.sink import TensorSink
from modelmon.core.loading.strategies import get_strategy
from modelmon.core.loading.strategies.base import StopFlag, Strategy, WorkerContext
from modelmon.core.model.plan import ShareState, assigned_bytes, load_order, partition
from modelmon.core.model.records import Model, ModelFile
from modelmon.core.model.tensor_parallel import KeptPart
from modelmon.core.options import LoadOptions
from modelmon.core.system.libc import LIBC
from modelmon.core.system.proc_status import own_status_bytes, raise_oom_score

PR_SET_PDEATHSIG = 1
GO = b"go"  # the parent's word to start, sent over each worker's own pipe


@dataclass(frozen=True, slots=True)
class WorkerTask:
    worker: int
    workers: int
    # Its tensors (all of them when the workers share their work), as the parent parsed them:
    # a file whose size changed since is refused.
    part: Handout
    strategy: str
    options: LoadOptions
    parent_pid: int
    shared_ids: tuple[int, ...] = ()  # ids of the descriptors the parent shares (by file)
    drop_behind: bool = False  # drop the page cache of each range once read (drop_behind.py)
    # Of a tensor-parallel rank's tensors read whole, the part each keeps (by name).
    parts: tuple[tuple[str, KeptPart], ...] = ()
    shared: SharedCopy | None = None  # a one-reader load's destination: the node's copy

    @classmethod
    def of_run(
        cls,
        handouts: list[Handout],
        strategy: str,
        options: LoadOptions,
        shared_ids: tuple[int, ...],
        drop_behind: bool,
        parts: dict[str, KeptPart] | None = None,
        shared: SharedCopy | None = None,
    ) -> list[WorkerTask]:
        """One task per handout, for the calling process's workers."""
        workers, parent = len(handouts), os.getpid()
        kept = tuple(sorted((parts or {}).items()))
        return [
            cls(n, workers, part, strategy, options, parent, shared_ids, drop_behind, kept, shared)
            for n, part in enumerate(handouts)
        ]


def build_context(
    model: Model,
    task_strategy: str,
    options: LoadOptions,
    worker: int,
    workers: int,
    send: Any,
    stop: StopFlag,
    shared_fds: dict[int, int] | None = None,
    shared_ids: dict[int, int] | None = None,
    shares: ShareState | None = None,
    drop_behind: bool = False,
    dealt: bool = False,
    parts: dict[str, KeptPart] | None = None,
    shared: SharedCopy | None = None,
) -> WorkerContext:
    """The context of worker ``worker`` of ``workers``: its share of tensors, sink, recorders.
    With ``shares`` (work shared by all workers) it may be handed any tensor; ``dealt``:
    ``model`` holds only this worker's share already (its handout). With ``drop_behind`` its
    reads' page cache is dropped as they complete."""
    strategy = get_strategy(task_strategy)
    if shares is None and not dealt:
        indexes = partition(model, workers, strategy.partition_for(options))[worker]
    else:
        indexes = load_order(model)
    sink = TensorSink(
        model,
        indexes,
        keep=not options.discard,
        verify=options.verify,
        scratch_bytes=options.chunk,
        lazy=shares is not None or not strategy.allocates,
        parts=parts,
        shared=shared,
    )
    dropper = DropBehind([f.path for f in model.files]) if drop_behind else None
    # A strategy that maps the file drops what it has released itself (after the record).
    after_read = dropper.dropped if dropper is not None and not strategy.maps_file else None
    return WorkerContext(
        worker=worker,
        model=model,
        indexes=indexes,
        options=options,
        sink=sink,
        recorder=ReadRecorder(worker, send, after_read=after_read),
        stop=stop,
        shared_fds=shared_fds,
        shared_ids=shared_ids,
        prefetch_recorder=ReadRecorder(worker, send, prefetch=True),
        shares=shares,
        first_reader=worker * options.threads,
        drop_behind=dropper,
    )


def own_peak_rss() -> int:
    """This process's own peak RSS (VmHWM; ``ru_maxrss`` only where /proc has none)."""
    peak = own_status_bytes("VmHWM:")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL us when the parent dies: no orphan keeps reading."""
    with contextlib.suppress(OSError, AttributeError):
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


# Raised by each worker for itself (no privilege needed): under a memory limit the OOM killer
# takes a worker, which holds the bytes, before the parent of the run, unless the parent has
# grown by half the limit more than it; the parent then says which worker it was and ends the
# others, where its own death would end the run with no word.
WORKER_OOM_SCORE_ADJ = 500


def _resized(files: tuple[ModelFile, ...]) -> str | None:
    """Which planned file's size is not what it was when the load was planned, in one line."""
    for file in files:
        if file.remote is not None:  # an object's reads are made If-Match its ETag
            continue
        size = os.stat(file.path).st_size
        if size != file.size:
            return (
                f"{file.path} changed between planning and loading "
                f"({file.size} bytes when planned, {size} now)"
            )
    return None


def _shrunk(files: tuple[ModelFile, ...]) -> str | None:
    """Which planned file is now shorter than when the load was planned, said in one line: a
    library's "incomplete metadata" or mmap's "length is greater than file size" name none."""
    for file in files:
        if file.remote is not None:
            continue
        with contextlib.suppress(OSError):
            size = os.stat(file.path).st_size
            if size < file.size:
                return (
                    f"{file.path} was truncated during the load "
                    f"({file.size} bytes when planned, {size} now)"
                )
    return None


def wait_for_go(conn: Connection) -> None:
    """Block until the parent says go over this worker's own pipe. Its way out is the pipe's
    end: the parent closes it to stop the run (or dies, and the kernel closes it)."""
    try:
        word = conn.recv_bytes()
    except (EOFError, OSError):
        raise LoadCancelled("cancelled before start") from None
    if word != GO:
        raise LoadError(f"the parent said {word!r} instead of go")


def worker_main(task: WorkerTask, conn: Connection, memory: RunMemory) -> None:
    """Process entry. Sends WorkerReady, waits for go, loads, sends WorkerDone/Failed.
    ``memory``: the run's stop flag, and the queue this worker's readers share with every
    other worker's when the work is shared."""
    _die_with_parent(task.parent_pid)
    raise_oom_score(WORKER_OOM_SCORE_ADJ)
    # Ctrl+C in a terminal reaches the whole process group: the parent decides, not us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    send_lock = threading.Lock()

    def send(message: object) -> None:
        with send_lock:
            conn.send(message)

    ctx: WorkerContext | None = None
    model: Model | None = None
    shared_fds: dict[int, int] | None = None
    stop, shares = memory.attach()
    strategy: Strategy | None = None
    try:
        strategy = get_strategy(task.strategy)()
        model = task.part.take().model()  # no header parsed again: the parent's columns
        if strategy.shares_fd:
            # Same open file description as the parent's (SCM_RIGHTS), not a reopen.
            shared_fds = {i: recv_handle(conn) for i in range(len(model.files))}
        changed = _resized(model.files)
        if changed is not None:
            raise LoadError(changed)
        ctx = build_context(
            model,
            task.strategy,
            task.options,
            task.worker,
            task.workers,
            send,
            stop,
            shared_fds,
            dict(enumerate(task.shared_ids)),
            shares,
            task.drop_behind,
            dealt=True,
            parts=dict(task.parts),
            shared=task.shared,
        )
        strategy.prepare(ctx)
        qt_free = not any(name.split(".")[0] in ("PySide6", "pyqtgraph") for name in sys.modules)
        send(
            WorkerReady(
                task.worker,
                os.getpid(),
                len(ctx.indexes),
                assigned_bytes(model, ctx.indexes),
                qt_free,
            )
        )
        wait_for_go(conn)
        start = now_ns()
        strategy.run(ctx)
        ctx.recorder.flush()
        if ctx.prefetch_recorder is not None:
            ctx.prefetch_recorder.flush()
        # A share of shared work covers only parts of tensors: the parent checks the whole.
        ctx.sink.check_complete(complete=shares is None)
        end = now_ns()
        peak_rss = own_peak_rss()
        send(
            WorkerDone(
                task.worker,
                ctx.sink.bytes_filled,
                start,
                end,
                ctx.sink.checksums() if task.options.verify and shares is None else (),
                peak_rss,
                tuple(ctx.notes),
                ctx.sink.filled_spans() if shares is not None else None,
                ctx.drop_behind.bytes if ctx.drop_behind is not None else 0,
                ctx.drop_behind.ns if ctx.drop_behind is not None else 0,
                tuple(ctx.requests),
            )
        )
    except BaseException as exc:  # everything becomes one message; the parent decides
        if ctx is not None:
            with contextlib.suppress(Exception):
                ctx.recorder.flush()
        kind, message = type(exc).__name__, one_line(exc)
        files = () if model is None else model.files
        shrunk = None if isinstance(exc, LoadCancelled) else _shrunk(files)
        if shrunk is not None:  # whatever the strategy's own error, this is what happened
            kind, message = "LoadError", shrunk
        storage = exc if isinstance(exc, StorageError) and shrunk is None else None
        requests = tuple(ctx.requests) if ctx is not None else ()
        with contextlib.suppress(Exception):
            send(WorkerFailed(task.worker, kind, message, storage, requests))
    finally:
        if strategy is not None:
            strategy.release()
        task.part.close()  # taken already, but for a failure before
        if ctx is not None:
            ctx.close()
            ctx.sink.release()
        for descriptor in (shared_fds or {}).values():
            with contextlib.suppress(OSError):
                os.close(descriptor)
        memory.close()
        conn.close()
