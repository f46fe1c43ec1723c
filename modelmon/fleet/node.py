"""What one node of a fleet does: check its own cache, wait for every node, load, report.

Runs inside a Ray task on the node, but knows nothing of Ray: the barrier is callables
(``cluster`` passes ones that talk to its barrier actor). The node's run is what its
configuration calls for (``run_for``: worker processes, or a program watched); its start gate
hears this node's verified cache state once the run is ready, and waits there for every
node, so each run starts when all nodes go. A node that fails before it arrives withdraws:
the others go without it.

A model in object storage is opened by each node with its own client and its own
configuration (credentials, endpoint, region from the node's environment: none travels in
the request). Before its first request the node checks that its endpoint is the one the
driver read, and once open that its objects are the ones the driver opened (size, ETag):
every node reads one version of one bucket, or its row says why not. A bound round reads
the objects by plain GETs (``plain_read``) instead of the configuration's load.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from modelmon.core import (
    CacheState,
    Configuration,
    LoadResult,
    Model,
    ObjectStorage,
    RanksResult,
    RanksRun,
    ReadStats,
    StorageFacts,
    StrategyConfig,
    open_model,
    run_for,
)
from modelmon.core.errors import (
    LoadCancelled,
    ObjectChangedError,
    StorageConfigError,
    one_line,
)
from modelmon.core.measuring import ObjectReading, plain_read
from modelmon.core.options import CacheMode, MiB
from modelmon.core.runs import ProgramRun, Session
from modelmon.core.storage import is_object_url, object_endpoint, object_storage, storage_timeout
from modelmon.core.system import cache_not_measured, storage_by_folder
from modelmon.fleet.ranks import NodeRanks, ranks_run, row_fields

READY_TIMEOUT_S = 300.0  # every node's workers ready and cache verified, or the round stops


@dataclass(frozen=True, slots=True)
class SameObjects:
    """A model in object storage as the driver opened it: every node must read these."""

    endpoint: str  # where the driver's requests went, as written
    objects: tuple[tuple[str, int, str | None], ...]  # (URL as written, size, ETag)

    @classmethod
    def of(cls, model: Model) -> SameObjects | None:
        remote = [f.remote for f in model.files if f.remote is not None]
        if not remote:
            return None
        return cls(remote[0].endpoint, tuple((r.url, r.size, r.etag) for r in remote))


@dataclass(frozen=True, slots=True)
class NodeRequest:
    """One round's load, the same for every node."""

    path: str  # the model: one URL, or the same path on every node (shared storage)
    config: Configuration  # with the round's cache state, for a strategy
    side: str  # "load", or "A"/"B" in a bench; a bound's side (``bucket.BOUND_SIDES``)
    round: int
    ready_timeout_s: float = READY_TIMEOUT_S
    same: SameObjects | None = None  # a model in object storage, as the driver opened it
    storage_timeout_s: float | None = None  # each node's reads of object storage
    bound: tuple[int, int] | None = None  # plain GETs (connections, part size) instead
    ranks: tuple[int, str] | None = None  # (N, mode): N ranks on the node (a strategy's)
    memory_limit: int | None = None  # bytes: the node's N ranks run in one cgroup of it

    @property
    def spec(self) -> str:
        if self.bound is not None:
            return bound_spec(*self.bound)
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
    storage: tuple[StorageFacts | ObjectStorage, ...]
    reads: ReadStats | None = None  # its requests to object storage, where it counted them
    withdrew: bool = False  # it failed before the start: the others went without it
    # time.time() on this node when it arrived at the barrier, ready; 0.0 when it never did.
    # No node goes before the last one arrived: its wait there is ``start_wall`` less this.
    arrived_wall: float = 0.0
    # N ranks on the node: what they did (``bytes`` is then what every reader of the node
    # read, ``seconds`` the slowest rank's time, ``peak_rss`` one worker's of any rank).
    ranks: NodeRanks | None = None

    @property
    def mbps(self) -> float:
        """The node's rate: its bytes, or N ranks' model, over its (slowest rank's) time."""
        count = self.bytes if self.ranks is None else self.ranks.model_bytes
        return count / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def object_reads(self) -> tuple[ReadStats, ...]:
        """Its requests to object storage: its load's, or each of its ranks' loads'."""
        if self.ranks is not None:
            return self.ranks.reads
        return (self.reads,) if self.reads is not None else ()

    @classmethod
    def failed(
        cls,
        request: NodeRequest,
        node_id: str,
        host: str,
        error: str | None,
        cache: CacheState,
        storage: tuple[StorageFacts | ObjectStorage, ...] = (),
        withdrew: bool = False,
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
            withdrew=withdrew,
        )


def bound_spec(connections: int, part: int) -> str:
    return f"plain GETs, {connections} connection(s), {part / MiB:g} MiB each"


# arrive(node_id) blocks until every node arrived: (go, None), or (None, why it broke).
Arrive = Callable[[str], tuple[float | None, str | None]]
# withdraw(node_id, reason): this node will not arrive; the others go without it.
Withdraw = Callable[[str, str], None]
# stopped(timeout_s): (why, fatal) once the round is stopped, else None once ``timeout_s``
# passed without a stop. Fatal: this node's row fails too (the round's coordination is lost).
Stopped = Callable[[float], tuple[str, bool] | None]
STOP_CHECK_S = 0.2  # how often a node's load looks whether the round was stopped


def load_on_node(
    request: NodeRequest,
    node_id: str,
    arrive: Arrive,
    withdraw: Withdraw,
    stopped: Stopped | None = None,
) -> NodeRun:
    with contextlib.ExitStack() as stack:
        if request.storage_timeout_s is not None:  # this process's and its workers'
            stack.enter_context(storage_timeout(request.storage_timeout_s))
        if request.bound is not None:
            return bound_on_node(request, node_id, arrive, withdraw)
        return _load(request, node_id, arrive, withdraw, stopped)


@dataclass
class BarrierGate:
    """This node at the fleet's barrier, as a run's start gate: whether (and when) it arrived
    (where it did not, the others are told it withdraws), when it went, or why the barrier
    broke."""

    node_id: str
    arrive: Arrive
    arrived: bool = False
    arrived_wall: float = 0.0
    went: list[float] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)

    def __call__(self) -> bool:
        self.arrived, self.arrived_wall = True, time.time()
        go, why = self.arrive(self.node_id)
        if go is None:
            self.broken.append(why or "the barrier broke")
            return False
        self.went.append(time.time())
        return True


def _load(
    request: NodeRequest,
    node_id: str,
    arrive: Arrive,
    withdraw: Withdraw,
    stopped: Stopped | None,
) -> NodeRun:
    host = socket.gethostname()
    state = cache_not_measured(request.cache)
    barrier = BarrierGate(node_id, arrive)
    stops: list[tuple[str, bool]] = []  # why the round was stopped while this node loaded

    def gate(prepared: CacheState) -> bool:
        nonlocal state
        state = prepared  # this node's own cache, verified
        return barrier()

    storage: tuple[StorageFacts | ObjectStorage, ...] = ()
    result: LoadResult | RanksResult | None = None
    failure: str | None = None
    try:
        model = open_on_node(request)
        storage = where_it_lives(model)
        run = (
            ranks_run(model, request.config, request.ranks, gate, request.memory_limit)
            if request.ranks is not None
            else run_for(model, request.config, start_gate=gate, monitor=False, path=request.path)
        )
        with stop_watch(run, stopped, stops):
            ended = run.run()
            result = ended if isinstance(ended, RanksResult) else ended.result
    except Exception as exc:  # an error on one node is that node's row, not the fleet's end
        failure = one_line(exc)
    finally:
        if not barrier.arrived:  # the other nodes must not wait for this one
            reason = failure or (result.error if result is not None else None)
            withdraw(node_id, reason or "stopped before the start")
    failed = NodeRun.failed(request, node_id, host, failure, state, storage, not barrier.arrived)
    failed = replace(failed, arrived_wall=barrier.arrived_wall)
    if result is None:
        return failed
    error, status = result.error, result.status
    if barrier.broken:
        error = f"did not start: {barrier.broken[0]}"
    elif stops and status == "cancelled":
        why, fatal = stops[0]
        error, status = f"stopped: {why}", "failed" if fatal else status
    start_wall = barrier.went[0] if barrier.went else 0.0
    ok = replace(failed, status=status, error=error, start_wall=start_wall)
    if isinstance(result, RanksResult):
        return replace(ok, **row_fields(result, request.memory_limit))
    return replace(
        ok,
        bytes=result.bytes,
        seconds=result.seconds,
        peak_rss=max((w.peak_rss for w in result.workers), default=0),
        cache=result.cache,
        reads=result.object_reads,
    )


def bound_on_node(
    request: NodeRequest, node_id: str, arrive: Arrive, withdraw: Withdraw
) -> NodeRun:
    """The bucket's bound on this node: every byte of the objects by plain GETs at the
    request's setting, started from the barrier once this node's connections are made."""
    assert request.bound is not None
    barrier = BarrierGate(node_id, arrive)
    storage: tuple[StorageFacts | ObjectStorage, ...] = ()
    reading: ObjectReading | None = None
    failure: str | None = None
    try:
        model = open_on_node(request)
        storage = where_it_lives(model)
        reading = plain_read(model, *request.bound, start_gate=barrier)
    except LoadCancelled:
        failure = None if barrier.broken else "cancelled"
    except Exception as exc:  # this node's row
        failure = one_line(exc)
    finally:
        if not barrier.arrived:
            withdraw(node_id, failure or "stopped before the start")
    state = cache_not_measured("cold")
    failed = NodeRun.failed(
        request, node_id, socket.gethostname(), failure, state, storage, not barrier.arrived
    )
    failed = replace(failed, arrived_wall=barrier.arrived_wall)
    if barrier.broken:
        return replace(failed, status="cancelled", error=f"did not start: {barrier.broken[0]}")
    if reading is None:
        return failed
    return replace(
        failed,
        status="ok",
        bytes=reading.bytes,
        seconds=reading.seconds,
        start_wall=barrier.went[0],
    )


def open_on_node(request: NodeRequest) -> Model:
    """The model, as this node opens it with its own configuration: for one in object
    storage, from the endpoint the driver read (checked before any request), and the same
    objects (size, ETag) the driver opened."""
    same = request.same
    if same is not None and is_object_url(request.path):
        endpoint, source = object_endpoint(request.path)
        if endpoint != same.endpoint:
            raise StorageConfigError(
                request.path,
                f"this node's requests would go to {endpoint} (its endpoint: {source}), the "
                f"fleet's go to {same.endpoint}: give this node the same endpoint "
                "(AWS_ENDPOINT_URL, or its profile's endpoint_url)",
            )
    model = open_model(request.path)
    if same is not None:
        found = SameObjects.of(model)
        ours = found.objects if found is not None else ()
        if [url for url, _, _ in ours] != [url for url, _, _ in same.objects]:
            raise ObjectChangedError(
                request.path, "this node found other objects there than the fleet opened"
            )
        for (url, size, etag), (_, our_size, our_etag) in zip(same.objects, ours, strict=True):
            if (size, etag) != (our_size, our_etag):
                raise ObjectChangedError(
                    url,
                    f"not the object the fleet opened: this node found ETag {our_etag}, "
                    f"{our_size} bytes; the fleet opened ETag {etag}, {size} bytes (replaced "
                    "meanwhile: every node reads one version)",
                )
    return model


def where_it_lives(model: Model) -> tuple[StorageFacts | ObjectStorage, ...]:
    """The storage of the model's files (each folder's), or of its objects (each bucket's)."""
    remote = [f.remote for f in model.files if f.remote is not None]
    if remote:
        return object_storage(remote)
    return storage_by_folder([f.path for f in model.files])


@contextlib.contextmanager
def stop_watch(
    load: Session | ProgramRun | RanksRun, stopped: Stopped | None, stops: list[tuple[str, bool]]
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
