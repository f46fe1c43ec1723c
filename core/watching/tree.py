"""The watched process tree: a root and every descendant seen, with their counters summed so
that nothing is counted twice and nothing that exited is lost.

Descendants are found by listing /proc each sample and reading the parent of each pid not seen
before (one small read per new process); a process stays in the tree once it joined, even
when its parent dies and it is handed to another. A child that starts and exits between two
samples is never seen, but its counters are not lost: when its parent reaps it, the kernel
adds them to the parent's (``cmajflt``/``cutime`` in /proc/PID/stat, and /proc/PID/io, which
includes reaped children).

Beside the counters, whether a live process's main thread was ready to run at the latest
refresh (state R), and what the main threads waited for a CPU since the one before
(``run_delay`` in /proc/PID/schedstat, counted when a wait ends): a server starved of CPU
uses little of it and would otherwise look idle.

Totals: the live processes' counters, plus the last counters of each process that vanished
without a parent in the tree to absorb them (the root, whose parent is modelmon or the shell;
an orphan reaped by init), each less its counters when the watch began (attached processes
bring their history).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from modelmon.core.metrics.procfs import ProcFile
from modelmon.core.watching.proc_counters import (
    ZERO,
    Counters,
    StatLine,
    parse_io,
    parse_stat,
    parse_statm,
)

GONE = (errno.ENOENT, errno.ESRCH)


CLAIM_DEPTH = 32  # ancestors looked through for a member (pid 0 has no stat: the walk ends)
CHILDREN_FILES_UP_TO = 256  # threads in the tree; beyond, one listing of /proc is cheaper
_HAVE_CHILDREN = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _children(pid: int) -> list[int]:
    """Children of a process: the union of its threads' children lists."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as children:
                found += [int(child) for child in children.read().split()]
        except (OSError, ValueError):
            continue
    return found


def _last_pid() -> int | None:
    """The most recent pid handed out (the last field of /proc/loadavg)."""
    try:
        with open("/proc/loadavg", "rb") as loadavg:
            return int(loadavg.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def read_command(pid: int) -> tuple[str, ...]:
    """argv of a process ((): a kernel thread, or it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            data = file.read()
    except OSError:
        return ()
    return tuple(part.decode(errors="replace") for part in data.split(b"\0") if part)


def still_running(members: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Those of ``members`` ((pid, start ticks)) still running: the same process (its start
    ticks), not a zombie (a zombie has ended; whoever adopted it reaps it)."""
    left = []
    for pid, start_ticks in members:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                data = stat.read()
            fields = data[data.rindex(b")") + 2 :].split()
        except (OSError, ValueError):
            continue
        if int(fields[19]) == start_ticks and fields[0] not in (b"Z", b"X"):
            left.append((pid, start_ticks))
    return left


@dataclass
class Member:
    """One process of the tree, from when it was first seen."""

    pid: int
    ppid: int
    start_ticks: int
    slot: int  # 0 for the root, then in the order processes were seen
    command: tuple[str, ...]
    first_seen_ns: int
    baseline: Counters  # its counters when the watch began (ZERO for one born since)
    last: Counters = ZERO  # at the latest read
    threads: int = 1
    rss: int = 0
    anon_rss: int = 0
    peak_rss: int = 0
    peak_anon_rss: int = 0
    exited_ns: int | None = None
    died_ns: int | None = None  # first seen a zombie: it ended then, though not yet reaped
    stopped_ns: int | None = None  # first seen stopped (SIGSTOP, a trace), while it stays so
    run_delay_ns: int | None = None  # its main thread's wait for a CPU so far (None: unknown)
    no_schedstat: bool = False
    io_denied: bool = False
    files: dict[str, ProcFile] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.exited_ns is None

    def proc(self, name: str) -> ProcFile:
        kept = self.files.get(name)
        if kept is None:
            kept = self.files[name] = ProcFile(f"/proc/{self.pid}/{name}", 1024)
        return kept

    def close(self) -> None:
        for kept in self.files.values():
            kept.close()
        self.files.clear()


class ProcessTree:
    """A root process and its descendants. ``refresh`` (from one thread) finds new members
    and reads everyone's counters; the totals and members are read after it."""

    def __init__(
        self, root: int, attached: bool, now_ns: int, command: tuple[str, ...] = ()
    ) -> None:
        self.root = root
        self._root_command = command  # what was started, where the watch started it
        self.attached = attached  # the processes there at the start bring their history
        self.members: dict[int, Member] = {}
        self._others: dict[int, int] = {}  # pid -> start ticks, of pids that are not ours
        self._retained = ZERO  # vanished members nobody in the tree absorbed
        self.denied: set[str] = set()  # what could not be read, named once
        self.waited_ns = 0  # the live members' main threads' wait for a CPU in the last refresh
        self.runnable = False  # a live member's main thread was ready to run at the last one
        # The watching process, when it is the subreaper of the command's orphans, and the
        # children it started itself (never orphans): see watching/orphans.py.
        self.adopter: int | None = None
        self._own: Callable[[], set[int]] = set
        self.adopted: set[int] = set()
        # The adopter's children judged not orphans of the tree (its own, or older than it).
        # A daemon's middle process may end unseen, handing its child to the adopter with no
        # new pid and no member's end: a child of the adopter not judged yet is looked at.
        self._judged: set[int] = set()
        # The newest pid handed out and the members seen ended, at the last two looks for new
        # members; a member's end hands its children to the adopter without a new pid.
        self._ended: set[int] = set()
        self._discovered_at: tuple[object, object] = (None, None)
        stat = self._read_stat(root)
        if stat is None:
            raise ProcessLookupError(errno.ESRCH, f"no process {root}")
        self._join(root, stat, now_ns, initial=True)

    # --- membership ------------------------------------------------------------------------

    def _read_stat(self, pid: int) -> StatLine | None:
        try:
            with open(f"/proc/{pid}/stat", "rb") as file:
                return parse_stat(file.read())
        except (OSError, ValueError, IndexError):
            return None

    def _join(self, pid: int, stat: StatLine, now_ns: int, initial: bool) -> Member:
        baseline = ZERO
        member = Member(
            pid,
            stat.ppid,
            stat.start_ticks,
            len(self.members),
            read_command(pid) or (self._root_command if pid == self.root else ()),
            now_ns,
            baseline,
        )
        self.members[pid] = member
        self._read_member(member, now_ns)
        if initial and self.attached:
            member.baseline = member.last
        return member

    def _discover(self, now_ns: int, initial: bool) -> None:
        """Add the processes whose parent is a live member (repeatedly: a child and its own
        child may both be new)."""
        # No pid handed out and no member ended since the look before the last: no process is
        # new. A pid is handed out before its process is linked to its parent: the look after
        # one that saw a new pid looks again, and two quick looks may both miss the link; the
        # parent's end, which hands such a child to the adopter as an orphan, looks again too.
        last_pid, before = _last_pid(), self._discovered_at
        key = (last_pid, len(self._ended))
        self._discovered_at = (before[1], key)
        quiet = not initial and last_pid is not None and before == (key, key)
        if quiet and not self._unjudged_children():
            return
        live = [m for m in self.members.values() if m.alive]
        threads = sum(m.threads for m in live)
        if _HAVE_CHILDREN and threads <= CHILDREN_FILES_UP_TO:
            candidates = self._children_of(live) | self._orphans()
        else:
            candidates = self._listed() | self._orphans()
        pids = {m.pid for m in live}
        own = self._own() if self.adopter is not None and candidates else set()
        added = True
        while added:
            added = False
            for pid, stat in sorted(candidates.items(), key=lambda item: item[1].start_ticks):
                orphan = self._is_orphan(pid, stat, own)
                if stat.ppid in pids or orphan:
                    member = self._join(pid, stat, now_ns, initial)
                    if orphan:
                        self.adopted.add(pid)
                        self._others.pop(pid, None)  # seen before it was handed over
                        # Its children: a daemon's middle process may be ending already.
                        candidates.update(self._children_of([member]))
                    pids.add(pid)
                    del candidates[pid]
                    added = True
        for pid, stat in candidates.items():
            if stat.ppid == self.adopter:
                self._judged.add(pid)
            else:
                self._others[pid] = stat.start_ticks

    def adopt_orphans(self, adopter: int, own: Callable[[], set[int]]) -> None:
        """From now on, a child of ``adopter`` (the watching process, a subreaper) born since
        the root and not among ``own`` is an orphan of the tree, handed over on its parent's
        death, and joins it."""
        self.adopter, self._own = adopter, own

    def _orphans(self) -> dict[int, StatLine]:
        """The adopter's children that may be orphans of the tree, with their stat lines."""
        found: dict[int, StatLine] = {}
        if self.adopter is None:
            return found
        for child in self._unjudged_children():
            stat = self._read_stat(child)
            if stat is not None:
                found[child] = stat
        return found

    def orphans_pending(self) -> bool:
        """Whether a child was handed to the adopter since the last look for members."""
        return bool(self._unjudged_children())

    def _unjudged_children(self) -> list[int]:
        """The adopter's children neither members nor judged: an orphan may be among them
        (one seen before it was handed over is looked at again)."""
        if self.adopter is None:
            return []
        return [
            child
            for child in _children(self.adopter)
            if child not in self.members and child not in self._judged
        ]

    def _is_orphan(self, pid: int, stat: StatLine, own: set[int]) -> bool:
        root = self.members.get(self.root)
        return (
            self.adopter is not None
            and stat.ppid == self.adopter
            and root is not None
            and pid != self.root
            and stat.start_ticks >= root.start_ticks
            and pid not in own
        )

    def claims(self, pid: int) -> bool:
        """Whether ``pid`` is of the tree, seen yet or not: a member, a descendant of one, or
        an orphan of the tree its adopter holds (any other process is someone else's)."""
        own = self._own() if self.adopter is not None else set()
        for _ in range(CLAIM_DEPTH):
            stat = self._read_stat(pid)
            member = self.members.get(pid)
            if stat is None or (member is not None and member.start_ticks == stat.start_ticks):
                return stat is not None
            if self._is_orphan(pid, stat, own):
                return True
            pid = stat.ppid
        return False

    def _children_of(self, live: list[Member]) -> dict[int, StatLine]:
        """New children of the live members, from each of their threads' children lists: a
        cost that follows the tree, not how busy the machine is."""
        found: dict[int, StatLine] = {}
        todo = [m.pid for m in live]
        while todo:
            parent = todo.pop()
            for child in _children(parent):
                if child in self.members or child in found:
                    continue
                stat = self._read_stat(child)
                if stat is not None:
                    found[child] = stat
                    todo.append(child)  # its own children may be new too
        return found

    def _listed(self) -> dict[int, StatLine]:
        """New pids of the whole system with their stat lines (one read per new pid; a look
        while no pid was handed out is skipped by ``_discover``)."""
        try:
            listed = {int(name) for name in os.listdir("/proc") if name.isdigit()}
        except OSError:
            return {}
        for pid in [pid for pid in self._others if pid not in listed]:
            del self._others[pid]
        found: dict[int, StatLine] = {}
        for pid in listed:
            if pid in self.members or pid in self._others:
                continue
            stat = self._read_stat(pid)
            if stat is not None:
                found[pid] = stat
        return found

    # --- reading -------------------------------------------------------------------------------

    def refresh(self, now_ns: int, discover: bool = True) -> None:
        """Read every live member's counters, then (``discover``) look for new members."""
        self.waited_ns, self.runnable = 0, False
        for member in list(self.members.values()):
            if member.alive:
                self._read_member(member, now_ns)
        if discover:
            self._discover(now_ns, initial=False)

    def adopt_existing(self, now_ns: int) -> None:
        """The descendants already running when the watch attached (their history is not
        the watch's: their counters start from here)."""
        self._discover(now_ns, initial=True)

    def _read_member(self, member: Member, now_ns: int) -> None:
        try:
            stat = parse_stat(member.proc("stat").read())
            if stat.start_ticks != member.start_ticks:  # the pid was reused: ours is gone
                raise ProcessLookupError(errno.ESRCH, "pid reused")
            member.ppid, member.threads = stat.ppid, stat.threads
            read_bytes, read_chars = member.last.read_bytes, member.last.read_chars
            if not member.io_denied:
                try:
                    read_bytes, read_chars = parse_io(member.proc("io").read())
                except PermissionError:
                    member.io_denied = True
                    self.denied.add(
                        "cannot read /proc/PID/io (read and IO counters) of processes of another "
                        "user: run modelmon as that user or as root"
                    )
            member.last = stat.counters._replace(read_bytes=read_bytes, read_chars=read_chars)
            if stat.state != "Z":
                member.rss, member.anon_rss = parse_statm(member.proc("statm").read())
            else:  # a zombie holds no memory; its counters are final
                member.rss = member.anon_rss = 0
                member.died_ns = member.died_ns or now_ns
                self._ended.add(member.pid)
            member.peak_rss = max(member.peak_rss, member.rss)
            member.peak_anon_rss = max(member.peak_anon_rss, member.anon_rss)
            self.runnable = self.runnable or stat.state == "R"
            if stat.state in ("T", "t"):
                member.stopped_ns = member.stopped_ns or now_ns
            else:
                member.stopped_ns = None
            self._read_run_delay(member, stat.state)
        except (ProcessLookupError, FileNotFoundError, ValueError, IndexError):
            self._vanish(member, now_ns)
        except OSError as error:
            if error.errno in GONE:
                self._vanish(member, now_ns)
            else:
                raise

    def _read_run_delay(self, member: Member, state: str) -> None:
        """Add what ``member``'s main thread waited for a CPU since its previous read to
        ``waited_ns`` (a kernel without schedstats has no such file: nothing is added)."""
        if state == "Z" or member.no_schedstat:
            return
        try:
            delay = int(member.proc("schedstat").read().split()[1])
        except (OSError, ValueError, IndexError):  # its stat was just read: no such file here
            member.no_schedstat = True
            return
        if member.run_delay_ns is not None:
            self.waited_ns += max(0, delay - member.run_delay_ns)
        member.run_delay_ns = delay

    def _vanish(self, member: Member, now_ns: int) -> None:
        """The member is gone (reaped). Its counters went to its parent when that is a live
        member (it reaped it); otherwise they are kept here."""
        member.exited_ns = now_ns
        member.died_ns = member.died_ns or now_ns
        member.rss = member.anon_rss = 0
        self._ended.add(member.pid)
        member.close()
        parent = self.members.get(member.ppid)
        if parent is None or not parent.alive:
            self._retained = self._retained.plus(member.last.minus(member.baseline))
        else:  # the parent's counters grow by all of it, the history before the watch too
            self._retained = self._retained.minus(member.baseline)

    def mark_exited(self, pid: int, now_ns: int) -> None:
        """A member that exited (a zombie read for the last time by the caller, about to be
        reaped by modelmon): its final counters stay in the totals."""
        member = self.members.get(pid)
        if member is not None and member.alive:
            self._read_member(member, now_ns)
            if member.alive:
                self._vanish(member, now_ns)

    # --- what the sources and the result read --------------------------------------------------

    def totals(self) -> Counters:
        total = self._retained
        for member in self.members.values():
            if member.alive:
                total = total.plus(member.last.minus(member.baseline))
        return total

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if m.alive]

    def rss(self) -> tuple[int, int]:
        """(resident, anonymous resident) bytes of the live members together."""
        live = self.live()
        return sum(m.rss for m in live), sum(m.anon_rss for m in live)

    def close(self) -> None:
        for member in self.members.values():
            member.close()
