"""A watched tree's connections to an object store's endpoint, and the bytes that arrived over
them: what can be seen from outside of a program that streams its model from a bucket.

Each look lists the sockets the tree's processes hold (``/proc/PID/fd``) and finds them in
the kernel's TCP table (``system.sockets``): those whose remote end is the endpoint (any of
its addresses, its port) are the connections; the bytes each has received are the model's
bytes arriving, counted by the kernel whoever reads them. A connection that closes is heard
as the kernel frees it (sock_diag's destroy broadcast, as root), with its last count: one
seen at a look counts its last bytes; one seen as another process's is left out; one opened
and closed between two looks, seen by no look, counts for the tree (said, when other
processes talk to the endpoint too). Each socket is known by the kernel's cookie, not by its
ends: on loopback the kernel gives a new connection the ends of a closed one (in TIME_WAIT)
at once. Without the broadcast, a closed connection keeps the count of its last look.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from modelmon.core.system.readiness import wait_readable
from modelmon.core.system.sockets import (
    DestroyedSockets,
    TcpSocket,
    all_tcp_sockets,
    socket_inodes,
    tcp_sockets,
)

MS = 1_000_000  # ns


@dataclass(frozen=True, slots=True)
class ConnectionLook:
    open: int  # connections to the endpoint held at this look
    received: int  # bytes received over them since the watch began, every look so far
    seen: int  # connections to the endpoint seen over the whole watch


def endpoint_addresses(endpoint: str) -> tuple[set[str], int]:
    """The addresses an endpoint URL's host resolves to, and its port."""
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname or ""
    try:
        found = {
            str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        }
    except OSError:
        found = set()
    return found | ({host} if host else set()), port


class EndpointConnections:
    """The tree's connections to ``endpoint``, look by look. ``from_start``: the tree was
    started by the watch, so every byte its connections received is the load's; attached to
    a running process, only what arrives after the first look counts."""

    def __init__(self, endpoint: str, *, from_start: bool = True) -> None:
        self.addresses, self.port = endpoint_addresses(endpoint)
        self.from_start = from_start
        # By the kernel's cookie of each socket: its ends may be a new connection's once it
        # is freed (on loopback the kernel reuses ends in TIME_WAIT at once).
        self._first: dict[int, int] = {}  # cookie → bytes it had received when first seen
        self._last: dict[int, int] = {}  # cookie → bytes at its latest look (or its close)
        self._open: set[int] = set()  # seen at a look, not heard freed yet
        self._others: set[int] = set()  # another process's (or there before the program)
        self._holder: dict[int, int] = {}  # cookie → the pid of the tree seen holding it
        self.others = False  # another process was seen with connections to the endpoint
        self.unseen_bytes = 0  # of connections heard closing, never seen open
        self.peak_open = 0
        self.seen = 0  # connections to the endpoint seen so far
        # Connections to the endpoint that exist already (this process's own, closing after
        # it opened the model; anyone else's) are not the program's, which has not started:
        # listed before the closes are listened to, so none closes unlisted and is heard;
        # and listed again once they are: a dump is not atomic (the kernel resumes each
        # part at an index in a hash chain, and a socket freed before that index shifts the
        # next one past it), so one that exists is missed only if both listings miss it.
        self._others |= self._listed()
        self.closing = DestroyedSockets()  # from now on: before the program starts
        self._others |= self._listed()
        self._listed_ns = time.monotonic_ns()

    def _listed(self) -> set[int]:
        return {entry.cookie for entry in all_tcp_sockets() if self._ours(entry)}

    def _ours(self, entry: TcpSocket) -> bool:
        return entry.remote[1] == self.port and entry.remote[0] in self.addresses

    def look(self, pids: Iterable[int]) -> ConnectionLook:
        members = list(pids)
        held = self._held(members)
        table = tcp_sockets()
        # A connection no listing has seen yet, unheld: one the tree opened since the listing
        # (listed again), or another process's (known as such from now on, never listed for).
        if any(
            self._ours(e) and inode not in held and e.cookie not in self._others
            for inode, e in table.items()
        ):
            held = self._held(members)
        open_now = 0
        for inode, entry in table.items():
            if not self._ours(entry):
                continue
            if inode not in held:
                self.others = True
                self._others.add(entry.cookie)
                continue
            # Held by the tree: the program's, whoever else was thought to hold it (one the
            # attached program held before the watch began).
            self._others.discard(entry.cookie)
            self._holder.setdefault(entry.cookie, held[inode])
            open_now += 1
            if entry.cookie not in self._first:
                self._first[entry.cookie] = 0 if self.from_start else entry.bytes_received
                self._open.add(entry.cookie)
            last = self._last.get(entry.cookie, 0)
            self._last[entry.cookie] = max(last, entry.bytes_received)
        for entry in self.closing.drain():
            self._closed(entry, time.monotonic_ns())
        self.peak_open = max(self.peak_open, open_now)
        self.seen = len(self._last)
        received = sum(self._last[i] - self._first[i] for i in self._last)
        return ConnectionLook(open_now, received, self.seen)

    @staticmethod
    def _held(pids: list[int]) -> dict[int, int]:
        """{socket inode: the pid holding it} of the tree's processes."""
        held: dict[int, int] = {}
        for pid in pids:
            held.update(dict.fromkeys(socket_inodes(pid), pid))
        return held

    def received_by(self) -> dict[int, int]:
        """{pid: bytes received on the connections it was seen holding}."""
        found: dict[int, int] = {}
        for cookie, pid in self._holder.items():
            got = self._last.get(cookie, 0) - self._first.get(cookie, 0)
            found[pid] = found.get(pid, 0) + max(0, got)
        return found

    def _closed(self, entry: TcpSocket, heard_ns: int) -> None:
        """A connection the kernel freed, heard by ``heard_ns``: its last count, for the one
        seen open, or for one never seen (opened and closed between two looks) that no
        other process held."""
        if not self._ours(entry):
            return
        if entry.cookie not in self._first:
            if entry.cookie in self._others:
                return
            # The kernel announces a free from a work queue, late on a busy machine: a
            # socket already gone from the listings (this process's own probe of the model)
            # can be heard after them. One whose last bytes came before the listings is not
            # a connection of the program, which had not started.
            idle = entry.idle_ms
            if self.from_start and idle is not None and heard_ns - idle * MS < self._listed_ns:
                return
            self._first[entry.cookie] = 0  # never seen at a look
            self.unseen_bytes += max(0, entry.bytes_received - 1)
        self._open.discard(entry.cookie)
        # A connection that had its peer's FIN counts it as one byte received (one closed by
        # the program first, freed before the peer's FIN, ends a byte short).
        last = self._last.get(entry.cookie, 0)
        self._last[entry.cookie] = max(last, entry.bytes_received - 1)

    def settle(self, most_s: float = 2.0) -> None:
        """After the tree has ended: wait until every connection seen open that no process
        holds any more has been heard freed (``most_s`` at most), then for the closes
        announced after it. The kernel frees a socket once its close is done and announces
        it from a work queue, later still on a busy machine; a connection still held (by a
        program the watch detaches from) is not waited for."""
        deadline = time.monotonic() + most_s
        while not self.closing.unavailable and self._closing_unheard():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if wait_readable(self.closing.fileno(), min(left, 0.05)):
                for entry in self.closing.drain():
                    self._closed(entry, time.monotonic_ns())
        self.closing.settle()

    def _closing_unheard(self) -> bool:
        """Whether a connection seen open is gone from its holders but not heard freed."""
        if not self._open:
            return False
        held = {e.cookie for e in tcp_sockets().values() if self._ours(e)}
        return any(cookie not in held for cookie in self._open)

    def close(self) -> None:
        self.closing.close()


@dataclass(frozen=True, slots=True)
class ConnectionReport:
    """What a watched program's connections to a bucket's endpoint did."""

    endpoint: str
    peak_open: int  # the most connections to it held at one look
    seen: int  # connections to it over the whole watch
    received_bytes: int  # bytes that arrived over them (the kernel's count)
    samples: tuple[tuple[float, int, int], ...]  # (seconds since start, open, received)

    def held_text(self, endpoint: bool = True) -> str:
        """How many connections, in words that hold when every one of them opened and closed
        between two looks (none held at a look: the most held at once is then unknown)."""
        to = f" to {self.endpoint}" if endpoint else ""
        if not self.seen:
            return f"no connection{to} was seen"
        if self.peak_open:
            return f"{self.peak_open} connection(s){to} at most ({self.seen} over the watch)"
        return f"{self.seen} connection(s){to}, each opened and closed between two looks"


class BucketArrivals:
    """A model in a bucket, watched through the tree's connections to its endpoint: each
    look's new bytes are an arrival window (from the previous look to this one), logged as
    reads of the model (file 0, at the offset of the bytes received so far) for the live
    plot and the result's timing, as pages arriving in the page cache are for a file."""

    def __init__(
        self, url: str, size: int, endpoint: str, *, from_start: bool, objects: int = 1
    ) -> None:
        """``url``: the model's one object, or the prefix of its ``objects``; ``size``: the
        bytes of them all."""
        self.url, self.size, self.endpoint, self.objects = url, size, endpoint, objects
        self.connections = EndpointConnections(endpoint, from_start=from_start)
        self.windows: list[tuple[int, int, int]] = []  # (start, end, bytes) of each arrival
        self.samples: list[tuple[int, int, int]] = []  # (ns, open, received)
        self.received = 0
        self._last_ns: int | None = None

    def look(
        self, now_ns: int, pids: Iterable[int], final: bool = False
    ) -> tuple[int, int, int] | None:
        """Look now; the arrival window (start, end, bytes) of what came since the last
        look, or None. ``final``: the program has ended; its connections' closes are waited
        for (announced just after them)."""
        if final:
            self.connections.settle()
        found = self.connections.look(pids)
        self.samples.append((now_ns, found.open, found.received))
        since = self._last_ns if self._last_ns is not None else now_ns
        self._last_ns = now_ns
        fresh = found.received - self.received
        if fresh <= 0:
            return None
        self.received = found.received
        window = (since, now_ns, fresh)
        self.windows.append(window)
        return window

    def notes(self) -> list[str]:
        """What the connections' count may lack, in a sentence each."""
        found = self.connections
        notes = []
        if found.closing.unavailable:
            notes.append(
                f"{found.closing.unavailable}: a connection that closed counts what it had "
                "received at the last look before"
            )
        if found.unseen_bytes and found.others:
            notes.append(
                f"{found.unseen_bytes / 1e6:.1f} MB arrived over connections to "
                f"{self.endpoint} that opened and closed between two looks: counted as the "
                "program's, though other processes talked to the endpoint too"
            )
        return notes

    def close(self) -> None:
        self.connections.close()

    def report(self, t0_ns: int) -> ConnectionReport:
        return ConnectionReport(
            endpoint=self.endpoint,
            peak_open=self.connections.peak_open,
            seen=self.connections.seen,
            received_bytes=self.received,
            samples=tuple(((ns - t0_ns) / 1e9, n, r) for ns, n, r in self.samples),
        )
