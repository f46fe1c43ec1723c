"""A proxy on loopback in front of an S3 endpoint, run as its own process, that makes it
behave as a bucket does where a loopback server does not: it holds every request before
passing it on (an object store's time to first byte: tens of ms on a real bucket, none on
loopback), paces each connection's answers (S3 serves one connection about 100 MB/s: the
reason clients open many) and, where asked, all answers together (the instance's network),
and throttles as S3 does: above a request rate per prefix, a request is answered
``503 SlowDown`` without reaching the server (a token bucket: ``rate`` requests a second,
``burst`` at once; S3 allows 5,500 GETs a second per prefix, and answers 503 while it
scales). Answers flow back by ``os.splice``, so the proxy adds no copy.

What it does not model: S3's scaling of a prefix's rate over minutes, a throttle that
counts the requests it refuses (here a refused request takes no token), and any limit
across prefixes.

Its own process, so that its threads (two a connection, pacing with sleeps) share no
interpreter lock with what is measured through it: the plain GETs of the bucket's ceiling run
in the bench's process, the loads in their own.

    python -m benchmarks.latency_proxy UPSTREAM PORT LATENCY_S CONNECTION_MBPS
        [--total-mbps T] [--rate R --burst B]

serves on 127.0.0.1:PORT until its standard input ends (the bench closes it, or dies).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import threading
import time

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
HEAD_LIMIT = 64 << 10  # a request's line and headers: S3 refuses more than 8 KiB


class RequestRate:
    """S3's request rate per prefix, as a token bucket: each prefix holds up to ``burst``
    tokens, refilled at ``rate`` a second; a request takes one, or is throttled when none is
    left (and takes none)."""

    def __init__(self, rate: float, burst: float) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a request rate needs rate > 0 and burst ≥ 1")
        self.rate, self.burst = rate, burst
        self._tokens: dict[str, tuple[float, float]] = {}  # prefix → (tokens, when)
        self._lock = threading.Lock()
        self.admitted = self.throttled = 0

    def admit(self, prefix: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, when = self._tokens.get(prefix, (self.burst, now))
            tokens = min(self.burst, tokens + (now - when) * self.rate)
            allowed = tokens >= 1.0
            self._tokens[prefix] = (tokens - 1.0 if allowed else tokens, now)
            if allowed:
                self.admitted += 1
            else:
                self.throttled += 1
            return allowed


class ByteRate:
    """A rate shared by every connection: each sender reserves its bytes' time on one clock
    and sleeps until then (a burst of ``slack_s`` of the rate is let through at once)."""

    def __init__(self, mbps: float, slack_s: float = 0.01) -> None:
        self.per_byte_s, self.slack_s = 1 / (mbps * 1e6), slack_s
        self._free_at = 0.0
        self._lock = threading.Lock()

    def take(self, count: int) -> None:
        with self._lock:
            now = time.monotonic()
            # An idle clock starts slack_s back: that much of the rate goes at once, no more.
            self._free_at = max(self._free_at, now - self.slack_s) + count * self.per_byte_s
            ahead = self._free_at - now
        if ahead > 0:
            time.sleep(ahead)


def prefix_of(target: str) -> str:
    """The prefix S3 rates a request by: its path up to the last ``/`` (bucket and folders)."""
    path = target.split("?", 1)[0]
    return path.rsplit("/", 1)[0]


def slow_down(method: str) -> bytes:
    """The answer to a throttled request (a HEAD's without a body), the connection kept."""
    body = b"" if method == "HEAD" else SLOW_DOWN
    head = (
        "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
        f"Content-Length: {len(SLOW_DOWN)}\r\n\r\n"
    )
    return head.encode() + body


class Proxy:
    """The proxy's connections: each client's requests to the upstream, its answers back."""

    def __init__(
        self,
        upstream: str,
        latency_s: float,
        connection_mbps: float,
        total_mbps: float = 0.0,
        rate: RequestRate | None = None,
    ) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self.upstream = (host, int(port))
        self.latency_s, self.connection_mbps = latency_s, connection_mbps
        self.total = ByteRate(total_mbps) if total_mbps else None
        self.rate = rate

    def requests(self, client: socket.socket, server: socket.socket) -> None:
        """Each request, whole, held ``latency_s``, then passed on or throttled. A client
        sends its next request only once it has read the answer to the last (S3's clients do
        not pipeline), so a throttled request's answer never cuts into another's."""
        pending = b""
        with contextlib.suppress(OSError):
            while True:
                request, pending = _next_request(client, pending)
                if not request:
                    break
                time.sleep(self.latency_s)
                method, target = _method_and_target(request)
                if self.rate is not None and not self.rate.admit(prefix_of(target)):
                    client.sendall(slow_down(method))
                    continue
                server.sendall(request)
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_WR)

    def answers(self, server: socket.socket, client: socket.socket) -> None:
        read_end, write_end = os.pipe()
        started, sent = time.monotonic(), 0
        try:
            while True:
                moved = os.splice(server.fileno(), write_end, 1 << 18)
                if moved == 0:
                    break
                sent += moved
                if self.total is not None:
                    self.total.take(moved)
                while moved:
                    moved -= os.splice(read_end, client.fileno(), moved)
                if self.connection_mbps:
                    ahead = sent / (self.connection_mbps * 1e6) - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                    else:  # idle between answers: the pace starts again
                        started, sent = time.monotonic(), 0
        except OSError:
            pass
        finally:
            os.close(read_end)
            os.close(write_end)
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_WR)

    def pair(self, client: socket.socket) -> None:
        """One client's connection, both ways, then both sockets closed (a long run opens
        thousands)."""
        with client, socket.create_connection(self.upstream) as server:
            answering = threading.Thread(target=self.answers, args=(server, client), daemon=True)
            answering.start()
            self.requests(client, server)
            answering.join()


def _next_request(client: socket.socket, pending: bytes) -> tuple[bytes, bytes]:
    """One whole request (its line, headers and body) from ``pending`` and what the client
    sends; (b"", b"") when the client closes (or sends what is no request)."""
    while b"\r\n\r\n" not in pending:
        data = client.recv(1 << 16)
        if not data or len(pending) > HEAD_LIMIT:
            return b"", b""
        pending += data
    head, _, rest = pending.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or b"0")
    while len(rest) < length:
        data = client.recv(1 << 16)
        if not data:
            return b"", b""
        rest += data
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


def _method_and_target(request: bytes) -> tuple[str, str]:
    line = request.split(b"\r\n", 1)[0].decode("latin-1")
    method, _, rest = line.partition(" ")
    return method, rest.partition(" ")[0]


def serve(listener: socket.socket, proxy: Proxy, stop: threading.Event) -> None:
    """Accept clients until ``stop`` is set."""
    listener.settimeout(0.2)
    while not stop.is_set():
        try:
            client, _ = listener.accept()
        except TimeoutError:
            continue
        client.settimeout(None)
        threading.Thread(target=proxy.pair, args=(client,), daemon=True).start()


def _until_stdin_ends(stop: threading.Event) -> None:
    with contextlib.suppress(OSError):
        while sys.stdin.buffer.read(1 << 10):
            pass
    stop.set()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.latency_proxy")
    parser.add_argument("upstream")
    parser.add_argument("port", type=int)
    parser.add_argument("latency_s", type=float)
    parser.add_argument("connection_mbps", type=float)
    parser.add_argument("--total-mbps", type=float, default=0.0, help="all answers together")
    parser.add_argument("--rate", type=float, default=0.0, help="requests a second per prefix")
    parser.add_argument("--burst", type=float, default=1.0, help="requests at once per prefix")
    args = parser.parse_args(argv)
    rate = RequestRate(args.rate, args.burst) if args.rate else None
    proxy = Proxy(args.upstream, args.latency_s, args.connection_mbps, args.total_mbps, rate)
    stop = threading.Event()
    threading.Thread(target=_until_stdin_ends, args=(stop,), daemon=True).start()
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", args.port))
        listener.listen(128)
        serve(listener, proxy, stop)


if __name__ == "__main__":
    main(sys.argv[1:])
