"""The Ray side of the fleet: one task per node, pinned to it, all behind one barrier actor.

Each round creates a fresh ``StartBarrier`` actor and one task per chosen node, scheduled with
``NodeAffinitySchedulingStrategy(node_id, soft=False)``: the task runs on that node or not at
all. A task prepares and verifies its own node's page cache, then calls the barrier and waits;
when the last node arrives, the barrier answers them all at once, so the loads hit the shared
storage together. A node that fails before it arrives aborts the barrier: the others are told
and stop instead of waiting. Tasks take no CPU from Ray's accounting (``num_cpus=0``): a
measurement must not queue behind other work, and its worker processes are its own.

Bench rounds alternate sides (A B A B …) over the same nodes, each round its own barrier.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from modelmon.core import LoadError, OptionsError
from modelmon.fleet.node import READY_TIMEOUT_S, NodeRequest, NodeRun, load_on_node
from modelmon.fleet.report import FleetResult, Side


@ray.remote(num_cpus=0)
class StartBarrier:
    """Releases every caller of ``arrive`` at once when ``parties`` have arrived."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived: set[str] = set()
        self.released = asyncio.Event()
        self.go: float | None = None
        self.broken: str | None = None

    async def arrive(self, node_id: str, timeout_s: float) -> tuple[float | None, str | None]:
        self.arrived.add(node_id)
        if len(self.arrived) == self.parties and not self.released.is_set():
            self.go = time.time()
            self.released.set()
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

    async def abort(self, node_id: str, reason: str) -> None:
        if not self.released.is_set():
            self.broken = f"node {node_id[:12]} stopped before the start: {reason}"
            self.released.set()


@ray.remote(num_cpus=0, max_retries=0)
def node_task(request: NodeRequest, barrier: Any) -> NodeRun:
    node_id = ray.get_runtime_context().get_node_id()

    def arrive(node: str) -> tuple[float | None, str | None]:
        go, why = ray.get(barrier.arrive.remote(node, request.ready_timeout_s))
        return go, why

    def abort(node: str, reason: str) -> None:
        ray.get(barrier.abort.remote(node, reason))

    return load_on_node(request, node_id, arrive, abort)


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
    """One barrier-synchronised load on every node; a node's failure is its row."""
    barrier = StartBarrier.remote(len(nodes))  # type: ignore[attr-defined]
    try:
        refs = [
            node_task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
                name=f"modelmon-fleet-{request.side}-{request.round}",
            ).remote(request, barrier)
            for node in nodes
        ]
        try:
            return list(ray.get(refs))
        except BaseException:  # Ctrl+C or a lost node: take the other tasks down too
            for ref in refs:
                ray.cancel(ref, force=True)
            raise
    finally:
        ray.kill(barrier)


def run_fleet(
    verb: str,
    path: str,
    sides: Sequence[Side],
    rounds: int,
    wanted: int | None = None,
    on_round: Callable[[list[NodeRun]], None] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> FleetResult:
    """Run ``rounds`` rounds of every side in turn (A B A B …) on the chosen nodes.

    Needs a connected Ray (``connect``). The model path must be the same on every node.
    """
    nodes = choose_nodes(alive_nodes(), wanted)
    runs: list[NodeRun] = []
    number = 0
    for _ in range(rounds):
        for side in sides:
            request = NodeRequest(
                path, side.strategy, side.options, side.label, number, ready_timeout_s
            )
            found = run_round(request, nodes)
            runs.extend(found)
            number += 1
            if on_round is not None:
                on_round(found)
    return FleetResult(verb, path, tuple(sides), tuple(runs))


class Connection:
    """``ray.init`` for the command's lifetime; an already connected Ray is left as it was."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        self.owned = False

    def __enter__(self) -> Connection:
        if not ray.is_initialized():
            try:
                ray.init(
                    address=self.address,
                    log_to_driver=False,  # the tasks' output must not mix into our JSON
                    logging_level=logging.WARNING,
                    configure_logging=True,
                )
            except ConnectionError as exc:
                raise LoadError(f"cannot reach the Ray cluster at {self.address}: {exc}") from None
            self.owned = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.owned:
            ray.shutdown()
