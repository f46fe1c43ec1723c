"""What one node of a fleet does: check its own cache, wait for every node, load, report.

Runs inside a Ray task on the node, but knows nothing of Ray: the barrier is two callables
(``cluster`` passes ones that talk to its barrier actor). The node's run is what its
configuration calls for (``run_for``: worker processes, or a program watched); its start gate
hears this node's verified cache state once the run is ready, and waits there for every
node, so each run starts when all nodes go.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from modelmon.core import (
    CacheState,
    Configuration,
    LoadResult,
    ProgramRun,
    Session,
    StorageFacts,
    StrategyConfig,
    cache_not_measured,
    open_model,
    run_for,
    storage_by_folder,
)
from modelmon.core.errors import one_line
from modelmon.core.options import CacheMode

READY_TIMEOUT_S = 300.0  # every node's workers ready and cache verified, or the round stops


@dataclass(frozen=True, slots=True)
class NodeRequest:
    """One round's load, the same for every node."""

    path: str  # the model, at the same path on every node (shared storage)
    config: Configuration  # with the round's cache state, for a strategy
    side: str  # "load", or "A"/"B" in a bench
    round: int
    ready_timeout_s: float = READY_TIMEOUT_S

    @property
    def spec(self) -> str:
        return self.config.spec

    @property
    def cache(self) -> CacheMode:
        """The cache state every node's run starts from (a program's: cold)."""
        return self.config.options.cache if isinstance(self.config, StrategyConfig) else "cold"


@dataclass(frozen=True, slots=True)
class NodeRun:
    """One node's part of one round: a small record that travels back to the driver."""

    node_id: str
    host: str
    side: str
    round: int
    spec: str
    status: str  # "ok" | "cancelled" | "failed"
    error: str | None
    bytes: int
    seconds: float
    start_wall: float  # time.time() on this node when it went; 0.0 when it never did
    peak_rss: int  # the largest of the node's worker processes
    cache: CacheState
    storage: tuple[StorageFacts, ...]

    @property
    def mbps(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @classmethod
    def failed(
        cls,
        request: NodeRequest,
        node_id: str,
        host: str,
        error: str | None,
        cache: CacheState,
        storage: tuple[StorageFacts, ...] = (),
    ) -> NodeRun:
        """The row of a node whose load gave no result (``error``: why, where known)."""
        return cls(
            node_id=node_id,
            host=host,
            side=request.side,
            round=request.round,
            spec=request.spec,
            status="failed",
            error=error,
            bytes=0,
            seconds=0.0,
            start_wall=0.0,
            peak_rss=0,
            cache=cache,
            storage=storage,
        )


# arrive(node_id) blocks until every node arrived: (go, None), or (None, why it broke).
Arrive = Callable[[str], tuple[float | None, str | None]]
Abort = Callable[[str, str], None]  # abort(node_id, reason): the others must not wait for us
# stopped(timeout_s): (why, fatal) once the round is stopped, else None once ``timeout_s``
# passed without a stop. Fatal: this node's row fails too (the round's coordination is lost).
Stopped = Callable[[float], tuple[str, bool] | None]
STOP_CHECK_S = 0.2  # how often a node's load looks whether the round was stopped


def load_on_node(
    request: NodeRequest,
    node_id: str,
    arrive: Arrive,
    abort: Abort,
    stopped: Stopped | None = None,
) -> NodeRun:
    host = socket.gethostname()
    state = cache_not_measured(request.cache)
    went: list[float] = []
    broken: list[str] = []
    stops: list[tuple[str, bool]] = []  # why the round was stopped while this node loaded
    arrived = False

    def gate(prepared: CacheState) -> bool:
        nonlocal arrived, state
        state = prepared  # this node's own cache, verified
        arrived = True
        go, why = arrive(node_id)
        if go is None:
            broken.append(why or "the barrier broke")
            return False
        went.append(time.time())
        return True

    storage: tuple[StorageFacts, ...] = ()
    result: LoadResult | None = None
    failure: str | None = None
    try:
        model = open_model(request.path)
        storage = storage_by_folder([f.path for f in model.files])
        run = run_for(model, request.config, start_gate=gate, monitor=False, path=request.path)
        with stop_watch(run, stopped, stops):
            result = run.run().result
    except Exception as exc:  # an error on one node is that node's row, not the fleet's end
        failure = one_line(exc)
    finally:
        if not arrived:  # the other nodes must not wait for this one
            reason = failure or (result.error if result is not None else None)
            abort(node_id, reason or "stopped before the barrier")
    failed = NodeRun.failed(request, node_id, host, failure, state, storage)
    if result is None:
        return failed
    error, status = result.error, result.status
    if broken:
        error = f"did not start: {broken[0]}"
    elif stops and status == "cancelled":
        why, fatal = stops[0]
        error, status = f"stopped: {why}", "failed" if fatal else status
    return replace(
        failed,
        status=status,
        error=error,
        bytes=result.bytes,
        seconds=result.seconds,
        start_wall=went[0] if went else 0.0,
        peak_rss=max((w.peak_rss for w in result.workers), default=0),
        cache=result.cache,
    )


@contextlib.contextmanager
def stop_watch(
    load: Session | ProgramRun, stopped: Stopped | None, stops: list[tuple[str, bool]]
) -> Iterator[None]:
    """For the block (the node's load or program run), a thread asks ``stopped`` whether the
    round was stopped (another node died or failed) and cancels ``load`` if so, noting why in
    ``stops``. Each ask waits at most ``STOP_CHECK_S``, so the thread ends soon after the
    block; one stuck on the barrier is left alone (a daemon) rather than holding the node."""
    if stopped is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            stop = stopped(STOP_CHECK_S)
            if stop is not None and not done.is_set():
                stops.append(stop)
                load.cancel()
                return

    watcher = threading.Thread(target=watch, name="modelmon-fleet-stop-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join(2 * STOP_CHECK_S)


def lost_node(request: NodeRequest, node: dict[str, Any], why: str) -> NodeRun:
    """The failed row of a node whose task ended without one (``why``: how)."""
    return NodeRun.failed(
        request,
        str(node["NodeID"]),
        str(node.get("NodeManagerHostname") or node.get("NodeManagerAddress") or "?"),
        why,
        cache_not_measured(request.cache),
    )
