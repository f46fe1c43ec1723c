"""The processes of the watched tree that had a model file open, tick by tick, by the kernel's
word (``system.file_access``): a rank that opens, reads and closes its shard between two
looks at its descriptors is named all the same."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from modelmon.core.system.file_access import FAN_CLOSE_NOWRITE, FAN_OPEN, FileAccess
from modelmon.core.watching.files import ModelFile

# A pid the kernel named that the tree has not found yet (forked since its last look for new
# members) is asked about again at the next ticks, then dropped (not of the tree).
PENDING_TICKS = 3


class Accessors:
    def __init__(self) -> None:
        # Opened with the first file to follow: a watch that never starts holds no group.
        self.access: FileAccess | None = None
        self._opened = False
        self.marked: set[int] = set()  # the model files' indexes the kernel reports on
        # pid → ({file: its events}, ticks left) of pids not yet members.
        self._pending: dict[int, tuple[dict[int, int], int]] = {}
        self._open: dict[int, set[int]] = {}  # member → files opened and not seen closed

    def track(self, files: Sequence[ModelFile]) -> None:
        if files and not self._opened:
            self.access, self._opened = FileAccess.open(), True
        for model_file in files:
            access = self.access
            if access is not None and model_file.index not in self.marked:
                marked = access.mark(model_file.path, model_file.index)
                self.marked |= {model_file.index} if marked else set()

    def take(self, members: Collection[int]) -> dict[int, set[int]]:
        """{pid: the indexes of the model files it had open} of the members that had one
        open since the last call: opened or closed since, or open all along."""
        if self.access is None:
            return {}
        pending, self._pending = self._pending, {}
        for pid, events in self.access.take().items():
            known, ticks = pending.get(pid, ({}, PENDING_TICKS))
            merged = {f: known.get(f, 0) | events.get(f, 0) for f in known.keys() | events.keys()}
            pending[pid] = (merged, ticks)
        self._open = {pid: files for pid, files in self._open.items() if files and pid in members}
        found = {pid: set(files) for pid, files in self._open.items()}
        for pid, (events, ticks) in pending.items():
            if pid not in members:
                if ticks > 1:
                    self._pending[pid] = (events, ticks - 1)
                continue
            found.setdefault(pid, set()).update(events)
            still = self._open.setdefault(pid, set())
            for index, mask in events.items():
                # Opened and closed since the last call (the kernel folds the two): closed.
                if mask & FAN_CLOSE_NOWRITE:
                    still.discard(index)
                elif mask & FAN_OPEN:
                    still.add(index)
        return found

    def close(self) -> None:
        if self.access is not None:
            self.access.close()
            self.access = None
