"""A tree's connections to an endpoint and the bytes that arrived over them, as the kernel's
TCP table counts them: a real server on loopback sends, a client in this process reads."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from modelmon.core.system.sockets import (
    DestroyedSockets,
    TcpSocket,
    all_tcp_sockets,
    socket_inodes,
    tcp_sockets,
)
from modelmon.core.watching import connections
from modelmon.core.watching.connections import ConnectionReport, EndpointConnections

SENT = 3_000_000
TIME_WAIT = 6  # the kernel's TCP state of a freed socket's stand-in


@contextmanager
def server(sends: int = SENT) -> Iterator[tuple[int, threading.Event]]:
    """A loopback server that sends ``sends`` bytes to each client, then waits for the event
    before closing (so a test can look while the connection is open)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    release = threading.Event()

    def serve() -> None:
        client, _ = listener.accept()
        client.sendall(b"x" * sends)
        release.wait(30)
        client.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield listener.getsockname()[1], release
    finally:
        release.set()
        thread.join(30)
        listener.close()


def _read(client: socket.socket, want: int) -> int:
    got = 0
    while got < want:
        data = client.recv(1 << 16)
        if not data:
            break
        got += len(data)
    return got


def test_the_kernel_counts_what_a_socket_received() -> None:
    with server() as (port, _), socket.create_connection(("127.0.0.1", port)) as client:
        assert _read(client, SENT) == SENT
        inodes = socket_inodes(os.getpid())
        mine = [s for i, s in tcp_sockets().items() if i in inodes and s.remote[1] == port]
        assert len(mine) == 1
        assert mine[0].bytes_received == SENT and mine[0].remote[0] == "127.0.0.1"


def test_connections_to_the_endpoint_and_their_bytes_look_by_look() -> None:
    with server() as (port, release):
        watched = EndpointConnections(f"http://127.0.0.1:{port}")  # hears closes from now
        assert watched.look([os.getpid()]).open == 0
        with socket.create_connection(("127.0.0.1", port)) as client:
            _read(client, SENT)
            look = watched.look([os.getpid()])
            assert (look.open, look.received, look.seen) == (1, SENT, 1)
            other = EndpointConnections(f"http://127.0.0.1:{port + 1}")  # another endpoint
            assert other.look([os.getpid()]).open == 0
            other.close()
            release.set()
        # Closed since: its bytes stay counted (its close heard, or its last look's), it is
        # no longer open.
        watched.closing.settle()
        look = watched.look([os.getpid()])
        assert (look.open, look.received, look.seen) == (0, SENT, 1)
        assert watched.peak_open == 1
        watched.close()


def test_attached_only_what_arrives_after_the_first_look_counts() -> None:
    with server() as (port, _), socket.create_connection(("127.0.0.1", port)) as client:
        _read(client, SENT)
        watched = EndpointConnections(f"http://localhost:{port}", from_start=False)
        assert watched.look([os.getpid()]).received == 0  # it arrived before the watch
        watched.close()


def test_a_connection_opened_and_closed_between_two_looks_is_heard_closing() -> None:
    with server() as (port, release):
        watched = EndpointConnections(f"http://127.0.0.1:{port}")
        with socket.create_connection(("127.0.0.1", port)) as client:
            release.set()
            assert _read(client, SENT + 1) == SENT  # to the server's close
        watched.closing.settle()
        look = watched.look([os.getpid()])
        assert watched.closing.unavailable is None  # root: the broadcast is heard
        assert (look.open, look.received, look.seen) == (0, SENT, 1)
        watched.close()


def test_a_closed_connection_no_look_saw_counts_though_others_talk_to_the_endpoint() -> None:
    """Another process's connection to the endpoint, seen at a look, is left out; one that
    opened and closed between two looks, seen by none, is the watched tree's."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]

    def serve(count: int) -> None:
        for _ in range(count):
            client, _ = listener.accept()
            client.sendall(b"x" * SENT)
            client.close()

    thread = threading.Thread(target=serve, args=(2,))
    thread.start()
    watched = EndpointConnections(f"http://127.0.0.1:{port}")
    try:
        nobody = [os.getppid()]  # the watched "tree": holds none of these sockets
        with socket.create_connection(("127.0.0.1", port)) as other:
            _read(other, SENT + 1)
            assert watched.look(nobody).open == 0 and watched.others  # someone else's
            with socket.create_connection(("127.0.0.1", port)) as quick:
                _read(quick, SENT + 1)
        thread.join(30)
        watched.closing.settle()
        look = watched.look(nobody)
        assert (look.received, look.seen) == (SENT, 1)  # the quick one, not the other
        assert watched.unseen_bytes == SENT
    finally:
        watched.close()
        listener.close()


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """Every listing of the watched tree's descriptors the looks make."""
    made: list[list[int]] = []
    held = EndpointConnections._held

    def counted(pids: list[int]) -> set[int]:
        made.append(pids)
        return held(pids)

    monkeypatch.setattr(EndpointConnections, "_held", staticmethod(counted))
    return made


def test_anothers_connection_is_listed_for_once_not_at_every_look(
    listings: list[list[int]],
) -> None:
    """A connection to the endpoint the tree does not hold sends a look to list the tree's
    descriptors again (the tree may have opened it since): once, not at every look."""
    with server() as (port, _), socket.create_connection(("127.0.0.1", port)) as other:
        _read(other, SENT)
        watched = EndpointConnections(f"http://127.0.0.1:{port}", from_start=False)
        try:
            nobody = [os.getppid()]  # the watched "tree": holds none of these sockets
            looks = [watched.look(nobody) for _ in range(3)]
        finally:
            watched.close()
    assert [look.open for look in looks] == [0, 0, 0] and watched.others
    assert len(listings) == 3  # there before the watch: known as another's from the start


def test_a_connection_opened_after_the_watch_began_is_listed_for_once(
    listings: list[list[int]],
) -> None:
    with server() as (port, _):
        watched = EndpointConnections(f"http://127.0.0.1:{port}")
        try:
            with socket.create_connection(("127.0.0.1", port)) as other:
                _read(other, SENT)
                nobody = [os.getppid()]
                looks = [watched.look(nobody) for _ in range(3)]
        finally:
            watched.close()
    assert [look.open for look in looks] == [0, 0, 0] and watched.others
    assert len(listings) == 4  # listed again at the first look that saw it, then never


def test_connections_none_held_at_a_look_are_counted_not_called_zero() -> None:
    def report(peak: int, seen: int) -> ConnectionReport:
        return ConnectionReport("http://127.0.0.1:9000", peak, seen, 342451, ())

    assert report(4, 11).held_text() == (
        "4 connection(s) to http://127.0.0.1:9000 at most (11 over the watch)"
    )
    assert report(0, 11).held_text(endpoint=False) == (
        "11 connection(s), each opened and closed between two looks"
    )
    assert report(0, 0).held_text() == "no connection to http://127.0.0.1:9000 was seen"


@pytest.mark.parametrize("watch_from", ["open", "freed unheard", "time-wait"])
def test_a_new_connection_on_the_ends_of_anothers_is_the_trees(
    watch_from: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On loopback the kernel gives a new connection the ends of one that closed (still in
    TIME_WAIT): the new one is the tree's, whether the watch began while the other was open,
    listed it open and began listening only once it was freed, or began after it closed."""
    with _serving(2) as port:

        def connect(local_port: int = 0) -> socket.socket:
            client = socket.socket()
            try:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                client.bind(("127.0.0.1", local_port))
                client.connect(("127.0.0.1", port))
            except OSError:
                client.close()
                raise
            return client

        before = connect()
        _read(before, SENT)
        ends = ("127.0.0.1", before.getsockname()[1])

        def close_before() -> None:
            if before.fileno() != -1:
                _close_first(before)
                _wait_for_time_wait(ends, port)  # freed: its ends free for a new connection

        if watch_from == "freed unheard":  # between the watch's listing and its listening
            listen = connections.DestroyedSockets

            def listen_late() -> DestroyedSockets:
                close_before()
                return listen()

            monkeypatch.setattr(connections, "DestroyedSockets", listen_late)
        watched = None
        try:
            if watch_from != "time-wait":
                watched = EndpointConnections(f"http://127.0.0.1:{port}")
            close_before()
            if watched is None:
                watched = EndpointConnections(f"http://127.0.0.1:{port}")
            with connect(ends[1]) as again:  # the same ends, between two looks
                _read(again, SENT)
                _close_first(again)
            watched.settle()
            look = watched.look([os.getpid()])
            assert (look.received, look.seen) == (SENT, 1)
        finally:
            before.close()
            if watched is not None:
                watched.close()


def test_what_arrives_after_the_last_look_counts_once_the_close_is_heard() -> None:
    """A connection seen open goes on receiving, then closes: its last bytes are counted
    from its destroy broadcast, which the last look waits for, not for its bound."""
    more = threading.Event()
    with _serving(1, more) as port:
        watched = EndpointConnections(f"http://127.0.0.1:{port}")
        try:
            with socket.create_connection(("127.0.0.1", port)) as client:
                _read(client, SENT)
                assert watched.look([os.getpid()]).received == SENT
                more.set()
                _read(client, SENT)
                _close_first(client)
            started = time.monotonic()
            watched.settle(most_s=30.0)
            assert time.monotonic() - started < 30.0  # heard, not waited out
            look = watched.look([os.getpid()])
            assert (look.open, look.received, look.seen) == (0, 2 * SENT, 1)
        finally:
            watched.close()


def test_attached_a_connection_held_before_the_watch_counts_what_comes_after() -> None:
    """Attached to a running program, its connection open before the watch began is its own
    once a look finds it held: what arrives after that look counts, up to its close."""
    more = threading.Event()
    with _serving(1, more) as port, socket.create_connection(("127.0.0.1", port)) as client:
        _read(client, SENT)
        watched = EndpointConnections(f"http://127.0.0.1:{port}", from_start=False)
        try:
            assert watched.look([os.getpid()]).received == 0  # it arrived before the watch
            more.set()
            _read(client, SENT)
            _close_first(client)
            watched.settle(most_s=30.0)
            look = watched.look([os.getpid()])
            assert (look.open, look.received, look.seen) == (0, SENT, 1)
        finally:
            watched.close()


@contextmanager
def _serving(clients: int, more: threading.Event | None = None) -> Iterator[int]:
    """A loopback server (its port) that sends each of ``clients`` SENT bytes (and SENT more
    once ``more`` is set), then closes once the client has closed its side."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(30)

    def serve() -> None:
        for _ in range(clients):
            client, _ = listener.accept()
            with client:
                client.sendall(b"x" * SENT)
                if more is not None and more.wait(30):
                    client.sendall(b"x" * SENT)
                client.recv(1)  # the client closes first: its end goes to TIME_WAIT

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
        thread.join(30)
        assert not thread.is_alive(), "the server never saw its clients close"
    finally:
        listener.close()


def _close_first(client: socket.socket) -> None:
    """Close ``client`` first (its end goes to TIME_WAIT), after the server's own close has
    arrived (counted as a byte received, as the watch expects of an orderly close)."""
    client.shutdown(socket.SHUT_WR)
    _read(client, 1)  # the server's close: nothing more comes
    client.close()


def _wait_for_time_wait(local: tuple[str, int], port: int) -> None:
    """Until the connection from ``local`` to ``port`` is in TIME_WAIT (its socket freed)."""
    deadline = time.monotonic() + 30
    while not any(
        entry.local == local and entry.remote[1] == port and entry.state == TIME_WAIT
        for entry in all_tcp_sockets()
    ):
        assert time.monotonic() < deadline, "the connection never reached TIME_WAIT"
        time.sleep(0.01)


def test_a_free_heard_late_of_a_connection_idle_since_before_the_listing_is_not_the_programs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel announces a free from a work queue, late on a busy machine: a connection
    already gone from the listings (the watcher's own probe of the model) can be heard after
    them. One whose last bytes came before the listings is no connection of the program."""
    port = 9  # no connection to it exists: the frees below are the only ones heard
    watched = EndpointConnections(f"http://127.0.0.1:{port}")
    time.sleep(0.05)
    gone = TcpSocket(0, ("127.0.0.1", 40000), ("127.0.0.1", port), 7, SENT, 1 << 60, 500)
    monkeypatch.setattr(watched.closing, "drain", lambda: [gone])
    assert watched.look([]).seen == 0  # idle 500 ms when heard: before the listing
    fresh = TcpSocket(0, ("127.0.0.1", 40001), ("127.0.0.1", port), 7, SENT + 1, 1 << 61, 0)
    monkeypatch.setattr(watched.closing, "drain", lambda: [fresh])
    look = watched.look([])
    assert (look.seen, look.received) == (1, SENT)  # its bytes (and the FIN) came since
    watched.close()
