"""The Ray side of the fleet: one task per node, pinned to it, all behind one barrier actor.

Each round creates a fresh ``StartBarrier`` actor, on the driver's node (a node under test
may die), and one task per chosen node, scheduled with
``NodeAffinitySchedulingStrategy(node_id, soft=False)``: the task runs on that node or not at
all. A task prepares and verifies its own node's page cache, then calls the barrier and waits;
when the last node arrives, the barrier answers them all at once, so the loads hit the shared
storage together. A node that fails before it arrives (it cannot open the model: no
credentials or another endpoint in its environment, no file at the path) withdraws: the
barrier waits for one node fewer and the others go without it. Tasks take no CPU from Ray's
accounting (``num_cpus=0``): a measurement must not queue behind other work, and its worker
processes are its own.

The driver takes each node's row as its task ends. A task that dies (its process killed, say
by the OOM killer, or its node lost) is that node's failed row, named with the process's pid;
a node that fails, or dies, stops the round: the barrier tells every other node (each task
watches for it), they cancel their loads and come back as cancelled rows, and a task that has
not ended ``STOP_GRACE_S`` later is killed. The fleet run ends with that round.

Bench rounds alternate sides (A B A B …) over the same nodes, each round its own barrier.
On a model in object storage, two bound rounds follow (unless asked not to): plain GETs from
one node alone, then from every node that loaded at once (``bucket``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TextIO

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from modelmon.core.errors import LoadError, OptionsError, one_line
from modelmon.fleet.bucket import BOUND_ALL, BOUND_ONE
from modelmon.fleet.node import (
    READY_TIMEOUT_S,
    NodeRequest,
    NodeRun,
    SameObjects,
    load_on_node,
    lost_node,
)
from modelmon.fleet.report import FleetResult, Side

WAIT_S = 0.5  # how long the driver waits for a task's end before it looks at the clock again
STOP_GRACE_S = 10.0  # after a round's stop, how long a node has to end its load
PID_TIMEOUT_S = 5.0


@ray.remote(num_cpus=0)
class StartBarrier:
    """Releases every caller of ``arrive`` at once when ``parties`` have arrived; answers every
    caller of ``stopped`` once the round is stopped."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived: set[str] = set()
        self.released = asyncio.Event()
        self.go: float | None = None
        self.broken: str | None = None
        self.stop_reason: str | None = None
        self.stop_event = asyncio.Event()
        self.pids: dict[str, int] = {}

    async def started(self, node_id: str, pid: int) -> None:
        self.pids[node_id] = pid

    async def task_pids(self) -> dict[str, int]:
        return self.pids

    async def arrive(self, node_id: str, timeout_s: float) -> tuple[float | None, str | None]:
        self.arrived.add(node_id)
        self._release_when_all_arrived()
        try:
            await asyncio.wait_for(self.released.wait(), timeout_s)
        except TimeoutError:
            if not self.released.is_set():
                self.broken = (
                    f"only {len(self.arrived)} of {self.parties} nodes were ready "
                    f"after {timeout_s:g} s"
                )
                self.released.set()
        return (None, self.broken) if self.broken else (self.go, None)

    async def withdraw(self, node_id: str, reason: str) -> None:
        """``node_id`` will not arrive (``reason``: its row says it): the rest go without it."""
        self.parties -= 1
        self._release_when_all_arrived()

    def _release_when_all_arrived(self) -> None:
        if len(self.arrived) >= self.parties and not self.released.is_set():
            self.go = time.time()
            self.released.set()

    async def stop(self, reason: str) -> None:
        """Stop the round: nodes waiting at the barrier are released broken, loading ones
        are told (``stopped``)."""
        if not self.released.is_set():
            self.broken = reason
            self.released.set()
        if self.stop_reason is None:
            self.stop_reason = reason
            self.stop_event.set()

    async def stopped(self) -> str:
        """Answers once the round is stopped: why."""
        await self.stop_event.wait()
        return self.stop_reason or "stopped"


@ray.remote(num_cpus=0, max_retries=0)
def node_task(request: NodeRequest, barrier: Any) -> NodeRun:
    node_id = ray.get_runtime_context().get_node_id()
    barrier.started.remote(node_id, os.getpid())  # named by the driver if this process dies
    stop = barrier.stopped.remote()  # one call per node, answered when the round stops

    def arrive(node: str) -> tuple[float | None, str | None]:
        go, why = ray.get(barrier.arrive.remote(node, request.ready_timeout_s))
        return go, why

    def withdraw(node: str, reason: str) -> None:
        ray.get(barrier.withdraw.remote(node, reason))

    def stopped(timeout_s: float) -> tuple[str, bool] | None:
        ready, _ = ray.wait([stop], timeout=timeout_s)
        if not ready:
            return None
        try:
            return str(ray.get(stop)), False
        except ray.exceptions.RayError as exc:  # no stop could reach the nodes any more
            return f"the round's barrier actor died ({type(exc).__name__})", True

    return load_on_node(request, node_id, arrive, withdraw, stopped)


def alive_nodes() -> list[dict[str, Any]]:
    """The cluster's alive nodes, in a stable order (host, then id)."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return sorted(nodes, key=lambda n: (n.get("NodeManagerHostname", ""), n["NodeID"]))


def choose_nodes(nodes: list[dict[str, Any]], wanted: int | None) -> list[dict[str, Any]]:
    """All nodes (``wanted`` None), or the first ``wanted`` of them."""
    if not nodes:
        raise LoadError("the Ray cluster has no alive node")
    if wanted is None:
        return nodes
    if wanted < 1:
        raise OptionsError(f"--nodes must be ≥ 1 or all, not {wanted}")
    if wanted > len(nodes):
        raise OptionsError(f"--nodes {wanted}, but the Ray cluster has {len(nodes)} alive nodes")
    return nodes[:wanted]


def run_round(request: NodeRequest, nodes: Sequence[dict[str, Any]]) -> list[NodeRun]:
    """One barrier-synchronised load on every node; a node's failure is its row, and stops
    the others (``collect``)."""
    # Every node holds two calls open on the barrier at once: its arrival and its stop watch.
    # The barrier lives on the driver's own node: on a node under test, that node's death
    # would take every other node's stop with it, failing them all instead of stopping them.
    driver_node = NodeAffinitySchedulingStrategy(
        ray.get_runtime_context().get_node_id(), soft=False
    )
    options = StartBarrier.options(  # type: ignore[attr-defined]
        max_concurrency=2 * len(nodes) + 8, scheduling_strategy=driver_node
    )
    barrier = options.remote(len(nodes))
    try:
        tasks = {
            node_task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
                name=f"modelmon-fleet-{request.side}-{request.round}",
            ).remote(request, barrier): node
            for node in nodes
        }
        try:
            return collect(request, tasks, barrier)
        except BaseException:  # Ctrl+C: take the tasks down too
            stop_tasks(list(tasks), barrier)
            raise
    finally:
        end_actor(barrier)


def stop_tasks(tasks: list[Any], barrier: Any) -> None:
    """The driver is stopping (Ctrl+C, SIGTERM): every node is told, as by a node's failure,
    and has ``STOP_GRACE_S`` to end its load, which removes what it made (cgroups, shared
    copies); then, or at once on a second Ctrl+C, its task is killed. A killed task takes
    every process it started with it (Ray ends them all), its guardians too: a cgroup one
    of them would have removed is then left to the node's next run (``remove_stale``)."""
    pending = tasks
    try:
        if sys.stderr.isatty():
            print(
                f"modelmon: stopping every node's load (at most {STOP_GRACE_S:g} s; "
                "Ctrl+C again kills them at once)",
                file=sys.stderr,
            )
        barrier.stop.remote("the fleet run was stopped on the driver")
        _, pending = ray.wait(tasks, num_returns=len(tasks), timeout=STOP_GRACE_S)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)


# How long the driver waits for a killed actor to be known dead before it returns.
ACTOR_END_S = 10.0


def end_actor(actor: Any) -> None:
    """Kill ``actor`` and wait, bounded, until Ray knows it dead: ``ray.kill`` only sends the
    request, and a driver that exits at once would leave the actor's process to outlive it."""
    ray.kill(actor)
    try:
        ray.get(actor.__ray_ready__.remote(), timeout=ACTOR_END_S)
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
        return  # dead, as asked; or not known dead within the bound: nothing more to do


def collect(request: NodeRequest, tasks: dict[Any, dict[str, Any]], barrier: Any) -> list[NodeRun]:
    """Each node's row as its task ends, in the nodes' order. The first row that failed once
    started (or task that died) stops the round; a node that withdrew before the start does
    not; tasks still running ``STOP_GRACE_S`` after a stop are killed."""
    rows: dict[Any, NodeRun] = {}
    pending = list(tasks)
    kill_at: float | None = None
    killed = False
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=WAIT_S)
        for ref in ready:
            rows[ref] = row = node_row(request, tasks[ref], ref, barrier, killed)
            if stops_the_round(row) and kill_at is None:
                barrier.stop.remote(f"node {row.node_id[:12]} ({row.host}) failed: {row.error}")
                kill_at = time.monotonic() + STOP_GRACE_S
        if pending and kill_at is not None and time.monotonic() >= kill_at and not killed:
            killed = True  # stopped, but still running: no way left but to end the task
            for ref in pending:
                ray.cancel(ref, force=True)
    return [rows[ref] for ref in tasks]


def stops_the_round(row: NodeRun) -> bool:
    """A node failed after it arrived, or its task died: the round is no longer the load
    that was asked for on every node at once."""
    return row.status == "failed" and not row.withdrew


def node_row(
    request: NodeRequest, node: dict[str, Any], ref: Any, barrier: Any, killed: bool
) -> NodeRun:
    """The node's row: what its task returned, or a failed row naming how the task ended."""
    try:
        row: NodeRun = ray.get(ref)
        return row
    except ray.exceptions.RayError as exc:
        pid = task_pid(barrier, node["NodeID"])
        process = "its modelmon task" + (f" (pid {pid})" if pid else "")
        if killed:
            why = f"{process} did not stop within {STOP_GRACE_S:g} s of the round's stop: killed"
        elif isinstance(exc, ray.exceptions.WorkerCrashedError):
            why = f"{process} died (killed, by the OOM killer or a kill -9, or crashed)"
        elif isinstance(exc, ray.exceptions.NodeDiedError):
            why = f"{process} was lost: its node died or became unreachable"
        else:  # Ray's messages run to paragraphs: their first sentence
            why = f"{process} ended: {type(exc).__name__}: {one_line(exc).split('. ')[0]}"
        return lost_node(request, node, why)


def task_pid(barrier: Any, node_id: str) -> int | None:
    """The pid of the node's task process, as it told the barrier; None if it cannot say."""
    try:
        pids: dict[str, int] = ray.get(barrier.task_pids.remote(), timeout=PID_TIMEOUT_S)
    except ray.exceptions.RayError:
        return None
    return pids.get(node_id)


def run_fleet(
    verb: str,
    path: str,
    sides: Sequence[Side],
    rounds: int,
    wanted: int | None = None,
    on_round: Callable[[list[NodeRun]], None] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    *,
    same: SameObjects | None = None,
    storage_timeout_s: float | None = None,
    bound: tuple[int, int] | None = None,
    memory_limit: int | None = None,
) -> FleetResult:
    """Run ``rounds`` rounds of every side in turn (A B A B …) on the chosen nodes; then,
    with ``bound`` (connections, part size), the bucket's bound rounds. ``memory_limit``:
    each node's ranks (a side's ``ranks``) run in one cgroup of that size on their node.

    Needs a connected Ray (``connect``). The model path must be the same on every node; a
    model in object storage is ``same``, as the driver opened it.
    """
    nodes = choose_nodes(alive_nodes(), wanted)
    runs: list[NodeRun] = []

    def result() -> FleetResult:
        return FleetResult(verb, path, tuple(sides), tuple(runs), bound)

    def go(request: NodeRequest, on: Sequence[dict[str, Any]]) -> bool:
        """One round; whether the fleet run goes on (no node failed once started)."""
        found = run_round(request, on)
        runs.extend(found)
        if on_round is not None:
            on_round(found)
        return not any(stops_the_round(run) for run in found)

    number = 0
    for _ in range(rounds):
        for side in sides:
            request = NodeRequest(
                path, side.config, side.label, number, ready_timeout_s, same, storage_timeout_s,
                ranks=side.ranks, memory_limit=memory_limit if side.ranks else None,
            )  # fmt: skip
            number += 1
            if not go(request, nodes):  # the fleet run ends failed here
                return result()
    readers = [n for n in nodes if all(r.status == "ok" for r in runs if r.node_id == n["NodeID"])]
    if bound is not None and readers:
        alone = NodeRequest(
            path, sides[0].config, BOUND_ONE, number, ready_timeout_s, same, storage_timeout_s,
            bound,
        )  # fmt: skip
        if go(alone, readers[:1]):
            go(replace(alone, side=BOUND_ALL, round=number + 1), readers)
    return result()


class Connection:
    """``ray.init`` for the command's lifetime; an already connected Ray is left as it was.

    Meanwhile standard output is standard error: Ray prints what its raylets report (a
    worker's death, say) to the driver's stdout from a thread of its own, and stdout must
    carry only the report (``--json``, ``--csv -``), written once Ray is shut down.

    ``ray.init`` sets its own SIGTERM handler (``sys.exit(15)``) over the CLI's, which stops
    a run as Ctrl+C does and exits ``TERMINATED``: the CLI's is put back."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        self.owned = False
        self.stdout: TextIO | None = None

    def __enter__(self) -> Connection:
        self.stdout, sys.stdout = sys.stdout, sys.stderr
        if not ray.is_initialized():
            main = threading.current_thread() is threading.main_thread()
            on_sigterm = signal.getsignal(signal.SIGTERM) if main else None
            try:
                ray.init(
                    address=self.address,
                    log_to_driver=False,  # the tasks' output must not mix into our JSON
                    logging_level=logging.WARNING,
                    configure_logging=True,
                )
            except ConnectionError as exc:
                self._restore()
                raise LoadError(f"cannot reach the Ray cluster at {self.address}: {exc}") from None
            except BaseException:
                self._restore()
                raise
            finally:
                if on_sigterm is not None:
                    signal.signal(signal.SIGTERM, on_sigterm)
            self.owned = True
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.owned:
                ray.shutdown()
        finally:
            self._restore()

    def _restore(self) -> None:
        if self.stdout is not None:
            sys.stdout, self.stdout = self.stdout, None
