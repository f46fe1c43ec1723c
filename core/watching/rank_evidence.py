"""What each process of a watched tree did with the model, tick by tick: the evidence a rank
is made of, and the tree's own figures over time, from which a cold start's phases are cut.

A process reads the model through its own descriptors (their offsets, and the bytes its read
calls returned while it held one: ``pread`` moves no offset), its mappings (the pages of them
resident in it) or its connections to a bucket's endpoint; the most of these is what it read.
What the tree read while no model descriptor was open in the reading process is read of other
files (imports, site-packages, configs): ``rchar`` counts every read call, from the page
cache or not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class TreeFigures(NamedTuple):
    """The tree's cumulative figures at one tick."""

    at_ns: int
    cpu_seconds: float
    system_seconds: float
    other_read_bytes: int  # read calls' bytes by processes holding no model descriptor
    rss: int
    anon_rss: int
    machine_busy_s: float  # CPU seconds of all the machine's cores not idle (nor in IO wait)
    machine_total_s: float
    # Bytes the tree made the block layer read (read_bytes of /proc/PID/io), O_DIRECT's too:
    # what a load past the page cache leaves as its only trace.
    storage_read_bytes: int = 0


@dataclass
class ProcessEvidence:
    """One process's reading of the model over the watch."""

    pid: int
    first_seen_ns: int
    anon_first: int | None = None  # its private memory at the first tick that saw it
    anon_peak: int = 0
    # Model pages resident in its mappings, per file the most at one look (smaps).
    mapped_peaks: dict[int, int] = field(default_factory=dict)
    # Its reading through mappings as ``mapped_reads`` follows it between looks.
    mapped_rises: int = 0
    positions: dict[int, int] = field(default_factory=dict)  # file → furthest offset
    read_calls_bytes: int = 0  # rchar while it held a model descriptor
    # rchar while the kernel saw it with a model file open (and no descriptor of it was
    # seen): counted once its reading of the model comes to ACCESS_SHARE of ``room`` (less
    # is a header read beside other files' reads).
    access_bytes: int = 0
    # The model files it held a descriptor of or the kernel saw it open, and their
    # bytes: what its read calls can have read of the model, however much they read.
    files: set[int] = field(default_factory=set)
    room: int = 0
    read_before_counted: int = 0  # its read calls' bytes in the watch before its first tick
    connection_bytes: int = 0  # received on its connections to the bucket's endpoint
    # (ns, bytes read so far) whenever that grew; the first and last say when it read.
    growth: list[tuple[int, int]] = field(default_factory=list)
    last_chars: int = 0
    exited_ns: int | None = None
    # Its rank as its environment names it (torchrun's RANK, LOCAL_RANK, MPI's ...), read
    # once it reads the model; None where none does.
    rank_label: int | None = None
    rank_variable: str | None = None
    environment_read: bool = False

    @property
    def read_bytes(self) -> int:
        return max(
            sum(self.mapped_peaks.values()),
            self.mapped_rises,
            sum(self.positions.values()),
            self.read_calls_bytes + self.kernel_seen_bytes,
            self.connection_bytes,
        )

    @property
    def kernel_seen_bytes(self) -> int:
        """Its read calls' bytes while the kernel alone saw it at the model's files."""
        reading = self.access_bytes + self.read_calls_bytes
        return self.access_bytes if reading >= ACCESS_SHARE * self.room else 0

    def note(self, now_ns: int) -> None:
        bytes_read = self.read_bytes
        if bytes_read and not self.environment_read:
            self.environment_read = True
            found = rank_of(self.pid)
            if found is not None:
                self.rank_label, self.rank_variable = found
        if not self.growth or bytes_read > self.growth[-1][1]:
            self.growth.append((now_ns, bytes_read))


# Of the model, read past the page cache by the tree's block reads: its weights' reading.
STORAGE_SHARE = 0.9
# Of the model files a process was seen to have open, by the kernel alone: what its read
# calls must come to while it did, to be its reading of them.
ACCESS_SHARE = 0.5
MAX_RANK_LABEL = 1 << 16  # larger than any job's world size
RANK_VARIABLES = (b"RANK", b"LOCAL_RANK", b"OMPI_COMM_WORLD_RANK", b"PMI_RANK", b"SLURM_PROCID")


def rank_of(pid: int) -> tuple[int, str] | None:
    """The rank a process's environment gives it, and the variable that says so."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            words = environ.read().split(b"\0")
    except OSError:
        return None
    found = dict(word.partition(b"=")[::2] for word in words if b"=" in word)
    for name in RANK_VARIABLES:
        value = found.get(name, b"")
        # A rank beyond any job's size is no rank's number: the ranks are told by order.
        if value.isdigit() and len(value) <= 6 and int(value) < MAX_RANK_LABEL:
            return int(value), name.decode()
    return None


class Evidence:
    """Fed by the observer: every look at descriptors and mappings (``looked``), every tick
    (``ticked``) and every look at a bucket's connections (``connections``); and by
    ``mapped_reads`` (``mapped_rises``), each under the observer's lock."""

    def __init__(self) -> None:
        self.processes: dict[int, ProcessEvidence] = {}
        self.sizes: dict[int, int] = {}  # the model files' sizes, by index
        self.history: list[TreeFigures] = []
        self._other_read = 0
        self._descriptor_holders: set[int] = set()
        # Holders at the look before: a rank that read its shard between two looks and closed
        # it held it at the first, and its reading since is the model's.
        self._held_before: set[int] = set()
        self._reaped: dict[int, int] = {}  # pid → read-call bytes of children it reaps
        # pid → its read calls' bytes since it last held a model descriptor at a tick: a
        # reader found holding one at a later look had read some of it before.
        self._unheld: dict[int, int] = {}
        self._counted_reaped: set[int] = set()
        # The pids the kernel saw with a model file open since the last tick, and in the
        # tick before (a read call's bytes may reach the counters a tick after its event).
        self._accessing: set[int] = set()
        self._accessed_before: set[int] = set()

    def process(self, pid: int, now_ns: int) -> ProcessEvidence:
        found = self.processes.get(pid)
        if found is None:
            found = self.processes[pid] = ProcessEvidence(pid, now_ns)
        return found

    def looked(
        self,
        now_ns: int,
        mapped: dict[int, dict[int, int]],
        positions: dict[int, dict[int, int]],
        holders: dict[int, set[int]],
    ) -> None:
        """One look: ``mapped`` {pid: {file: model bytes resident in its mappings}} (only from
        a look that read smaps), ``positions`` {pid: {file: offset}} of its model descriptors,
        ``holders`` {pid: the model files it has a descriptor of}."""
        self._held_before, self._descriptor_holders = self._descriptor_holders, set(holders)
        for pid, held in holders.items():
            self._touched(self.process(pid, now_ns), held)
        for pid, files in mapped.items():
            process = self.process(pid, now_ns)
            for file, resident in files.items():
                process.mapped_peaks[file] = max(process.mapped_peaks.get(file, 0), resident)
            process.note(now_ns)
        for pid, offsets in positions.items():
            process = self.process(pid, now_ns)
            for file, offset in offsets.items():
                process.positions[file] = max(process.positions.get(file, 0), offset)
            process.note(now_ns)

    def _touched(self, process: ProcessEvidence, files: set[int]) -> None:
        if not files <= process.files:
            process.files |= files
            process.room = sum(self.sizes.get(index, 0) for index in process.files)

    def accessed(
        self, now_ns: int, found: dict[int, set[int]], read_since_start: dict[int, int]
    ) -> None:
        """{pid: the model files} the kernel saw it have open since the last call; {pid:
        its read calls' bytes since the watch began} (before a tick first counted it, a
        process that read and held nothing at the looks read from the model then)."""
        for pid, files in found.items():
            process = self.process(pid, now_ns)
            self._touched(process, files)
            if not process.last_chars:
                process.read_before_counted = read_since_start.get(pid, 0)
        self._accessing |= set(found)

    def connections(self, now_ns: int, received: dict[int, int]) -> None:
        """{pid: bytes received so far on its connections to the bucket's endpoint}."""
        for pid, count in received.items():
            process = self.process(pid, now_ns)
            process.connection_bytes = max(process.connection_bytes, count)
            process.note(now_ns)

    def ticked(
        self,
        now_ns: int,
        members: list[tuple[int, int, int, int, int | None, int | None]],
        cpu_seconds: float,
        system_seconds: float,
        rss: int,
        anon_rss: int,
        machine: tuple[float, float] = (0.0, 0.0),
        storage_read_bytes: int = 0,
    ) -> None:
        """One tick: ``members`` (pid, parent pid, read_chars, anon_rss, reaped_ns, died_ns)
        of every process of the tree, the tree's totals and the machine's (busy, total) CPU
        seconds.
        A parent's counters take in a child's when it reaps it: those bytes were the child's,
        counted already."""
        for pid, ppid, chars, _anon, exited, _died in members:
            # Reaped: what its read calls returned goes to its parent's counters, whenever the
            # parent's next read sees it; credited to the parent until then.
            if exited is not None and pid not in self._counted_reaped:
                self._counted_reaped.add(pid)
                self._reaped[ppid] = self._reaped.get(ppid, 0) + chars
        accessing = self._accessing | self._accessed_before
        self._accessed_before, self._accessing = self._accessing, set()
        for pid, _ppid, chars, anon, _exited, died in members:
            process = self.process(pid, now_ns)
            if process.anon_first is None:  # its first tick: what it holds already is not read
                process.anon_first = anon
            first = not process.last_chars
            grown = max(0, chars - process.last_chars) if not first else 0
            process.last_chars = chars
            credit = self._reaped.get(pid, 0)
            if credit:
                taken = min(grown, credit)
                grown -= taken
                self._reaped[pid] = credit - taken
            if died is not None and process.exited_ns is None:
                process.exited_ns = died  # its end, though its parent reaps it later
            if pid in self._descriptor_holders or pid in self._held_before:
                # Up to its files' bytes: the rest of the tick's read calls were of other
                # files (or the model again: the counters cannot tell them apart).
                read = grown + self._before_held(process, grown)
                credit = min(read, self._room_left(process))
                process.read_calls_bytes += credit
                process.note(now_ns)
                self._other_read += read - credit
            elif pid in accessing:
                # Its reading before the first tick that saw it, too: a rank that read its
                # shard wholly before the tree found it.
                read = process.read_before_counted if first else grown
                credit = min(read, self._room_left(process))
                process.access_bytes += credit
                process.note(now_ns)
                self._other_read += read - credit
                self._unheld[pid] = self._unheld.get(pid, 0) + read - credit
            else:
                self._other_read += grown
                self._unheld[pid] = self._unheld.get(pid, 0) + grown
            process.anon_peak = max(process.anon_peak, anon)
        self.history.append(
            TreeFigures(
                now_ns,
                cpu_seconds,
                system_seconds,
                self._other_read,
                rss,
                anon_rss,
                *machine,
                storage_read_bytes,
            )
        )

    @staticmethod
    def _room_left(process: ProcessEvidence) -> int:
        return max(0, process.room - process.read_calls_bytes - process.access_bytes)

    def _before_held(self, process: ProcessEvidence, grown: int) -> int:
        """What a process newly seen holding a model descriptor read of the model before the
        tick that saw it: its read calls' bytes since it last held one (taken from the other
        files'), up to what its descriptors' offsets show of the model beyond its counted
        bytes (its imports and other files' reads are not the model's)."""
        before = self._unheld.pop(process.pid, 0)
        shown = sum(process.positions.values()) - process.read_calls_bytes - grown
        credit = min(before, max(0, shown))
        self._other_read -= credit
        return credit

    def storage_span(self, model_bytes: int, until_ns: int) -> tuple[int, int] | None:
        """Where nothing arrived in the page cache and no rank was seen reading (reads past
        the page cache: O_DIRECT, a streamer's own buffers), the stretch in which the tree's
        block reads took in a model's worth: from the last tick before they did to the
        first after; None where they never came to ``STORAGE_SHARE`` of it by ``until_ns``."""
        ticks = [t for t in self.history if t.at_ns <= until_ns]
        if not ticks or not model_bytes:
            return None
        start, end = ticks[0].storage_read_bytes, ticks[-1].storage_read_bytes
        if end - start < STORAGE_SHARE * model_bytes:
            return None
        done = next(
            t for t in ticks if t.storage_read_bytes >= end - (1 - STORAGE_SHARE) * model_bytes
        )
        wanted = done.storage_read_bytes - STORAGE_SHARE * model_bytes
        # The tree's sum drops when a member ends: no tick may be that low; then from the first.
        began = max(
            (t for t in ticks if t.storage_read_bytes <= wanted),
            key=lambda t: t.at_ns,
            default=ticks[0],
        )
        return began.at_ns, done.at_ns

    def at(self, at_ns: int) -> TreeFigures | None:
        """The tree's figures at ``at_ns``, between the two ticks around it (linearly)."""
        history = self.history
        if not history:
            return None
        if at_ns <= history[0].at_ns:
            return history[0]
        if at_ns >= history[-1].at_ns:
            return history[-1]
        low, high = 0, len(history) - 1
        while high - low > 1:
            middle = (low + high) // 2
            if history[middle].at_ns <= at_ns:
                low = middle
            else:
                high = middle
        before, after = history[low], history[high]
        share = (at_ns - before.at_ns) / max(1, after.at_ns - before.at_ns)

        def between(a: float, b: float) -> float:
            return a + (b - a) * share

        return TreeFigures(
            at_ns,
            between(before.cpu_seconds, after.cpu_seconds),
            between(before.system_seconds, after.system_seconds),
            round(between(before.other_read_bytes, after.other_read_bytes)),
            round(between(before.rss, after.rss)),
            round(between(before.anon_rss, after.anon_rss)),
            between(before.machine_busy_s, after.machine_busy_s),
            between(before.machine_total_s, after.machine_total_s),
            round(between(before.storage_read_bytes, after.storage_read_bytes)),
        )
