"""A watched command under a memory limit: the memory cgroup it runs in, from its first
instruction (it joins between fork and exec), its children with it, as in a container of that
size. Made at the watch's start, read into the result, removed at its end however it ends
(``system.memory_cgroup``). Where none can be made, a note says so and the watch goes on
without."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from modelmon.core.errors import OptionsError
from modelmon.core.system.memory_cgroup import MemoryCgroup, limited
from modelmon.core.system.memory_limit import planned_only


class WatchMemory:
    """The memory limit of one watch (None: none)."""

    def __init__(self, limit: int | None, attached: bool) -> None:
        if limit is not None and attached:
            raise OptionsError(
                "--memory-limit applies to a command modelmon starts: a running process "
                "already has the memory it took"
            )
        self.limit = limit
        self.cgroup: MemoryCgroup | None = None
        self.notes: list[str] = []

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """For the watch: the cgroup, removed at the end."""
        with limited(self.limit) as memory:
            if isinstance(memory, str) and self.limit is not None:
                self.notes.append(planned_only(memory, self.limit))
            self.cgroup = memory if isinstance(memory, MemoryCgroup) else None
            try:
                yield
            finally:
                self.cgroup = None

    def preexec(self, then: Callable[[], None]) -> Callable[[], None]:
        """The command's ``preexec_fn``: join the cgroup, then ``then``."""
        if self.cgroup is None:
            return then
        join = self.cgroup.join_in_child()

        def both() -> None:
            join()
            then()

        return both
