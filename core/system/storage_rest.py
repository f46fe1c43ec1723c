"""A network mount's rest between runs: a run on network storage starts ``STORAGE_REST_S``
after this process's last run on it ended, so that no run is timed with the help of the one
before it (what the mount's client kept of it). Local storage needs no rest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from modelmon.core.limits import STORAGE_REST_S
from modelmon.core.system import device_use, readahead
from modelmon.core.system.residency import PathArg, as_paths
from modelmon.core.system.storage import storage_facts


def rest_storage(
    paths: PathArg | Iterable[PathArg],
    stop: threading.Event | None = None,
    on_rest: Callable[[float], None] | None = None,
) -> float:
    """Wait until ``STORAGE_REST_S`` have passed since this process's last run on the network
    storage holding ``paths`` ended; the seconds of rest it asked for (none on local storage,
    or before the first run). ``stop`` ends the wait; ``on_rest`` hears the seconds first.

    A network filesystem's client keeps what a run left it (buffers, connections, threads)
    for seconds after the run: on an rclone mount, a one-stream read of a cold 1 GB file ran
    715 MB/s when it started 3 s after a four-stream read of it, and 592-618 MB/s when it
    started 8-23 s after. Runs compared in rounds would each be timed with the help of the
    one before; after the rest, the run's own preparation (drop, priming) adds about 3 s
    (``benchmarks.client_rest`` measures it again)."""
    wait = rest_left(paths)
    if wait > 0:
        if on_rest is not None:
            on_rest(wait)
        if stop is not None:
            stop.wait(wait)
        else:
            time.sleep(wait)
    return wait


def rest_left(paths: PathArg | Iterable[PathArg]) -> float:
    """Seconds ``rest_storage`` would wait now."""
    names = as_paths(paths)
    network = [name for name in names if _on_network(name)]
    ended = device_use.last_ended(readahead.device_names(network)) if network else None
    return 0.0 if ended is None else max(0.0, ended + STORAGE_REST_S - time.monotonic())


def _on_network(path: str) -> bool:
    try:
        facts = storage_facts(path)
    except OSError:
        return False
    return facts.remote
