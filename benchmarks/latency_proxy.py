"""A proxy on loopback in front of an S3 endpoint, run as its own process: it holds every
request before passing it on (an object store's time to first byte: tens of ms on a real
bucket, none on loopback) and paces each connection's answers (S3 serves one connection
about 100 MB/s: the reason clients open many). Answers flow back by ``os.splice``, so the
proxy adds no copy.

Its own process, so that its threads (two a connection, pacing with sleeps) share no
interpreter lock with what is measured through it: the plain GETs of the bucket's ceiling run
in the bench's process, the loads in their own.

    python -m benchmarks.latency_proxy UPSTREAM PORT LATENCY_S CONNECTION_MBPS

serves on 127.0.0.1:PORT until its standard input ends (the bench closes it, or dies).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time


class Proxy:
    """The proxy's connections: each client's requests to the upstream, its answers back."""

    def __init__(self, upstream: str, latency_s: float, connection_mbps: float) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self.upstream = (host, int(port))
        self.latency_s, self.connection_mbps = latency_s, connection_mbps

    def requests(self, client: socket.socket, server: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(1 << 16):
                time.sleep(self.latency_s)
                server.sendall(data)
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
    upstream, port, latency_s, connection_mbps = argv
    stop = threading.Event()
    threading.Thread(target=_until_stdin_ends, args=(stop,), daemon=True).start()
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(128)
        serve(listener, Proxy(upstream, float(latency_s), float(connection_mbps)), stop)


if __name__ == "__main__":
    main(sys.argv[1:])
