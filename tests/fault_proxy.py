"""A fault-injecting HTTP/1.1 proxy on loopback, in front of an S3-compatible test server.

It forwards each request unchanged (the signature covers the Host header, which it keeps)
and can, on request: add latency per request, answer with 503 SlowDown or 429 bursts or
500s (or any status), throttle as S3 does above a request rate per prefix (503 SlowDown by
the bench's proxy's token bucket, ``benchmarks.latency_proxy.RequestRate``), reset a
connection mid-body (a RST after N bytes), answer as a server that ignores ranges (200,
the whole object, no Content-Range), shift the Content-Range of what it sends, say another
ETag or another size of the object, take a request and never answer it (held until the
client closes its connection or the proxy stops: a reader that gave up, or died, leaves no
connection behind), send an answer up to a byte of the object and hold the rest until
released (a load held mid-way), or redirect (301, 307) to another host. Faults may wait
for ``after`` GETs to pass first (those that open the model). It records every request it
saw. It runs in the test's process and stops with it.
"""

from __future__ import annotations

import contextlib
import http.client
import selectors
import socket
import socketserver
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.latency_proxy import RequestRate, prefix_of


@dataclass(frozen=True)
class Seen:
    """A request the proxy saw, and what it answered."""

    method: str
    path: str
    range: str | None
    if_match: str | None
    fault: str  # "" when forwarded as it came


@dataclass
class Faults:
    """What the proxy does to the next requests (GETs of objects; listing passes)."""

    latency_s: float = 0.0
    throttle: int = 0  # answer this many with throttle_status
    throttle_status: int = 503
    # Answer GETs above this many a second per prefix (``burst`` at once) with
    # throttle_status (503 SlowDown), as S3 does; 0: no rate.
    rate: float = 0.0
    burst: float = 1.0
    reset_after: int | None = None  # cut the next body after this many bytes...
    resets: int = 0  # ...this many bodies...
    cleanly: bool = False  # ...closing with a FIN (every byte sent arrives) or a RST (the
    # peer's kernel drops what it had not sent, as a connection reset does)
    ignore_ranges: bool = False  # answer 200 with the whole object, no Content-Range
    misreport: int = 0  # shift the next answer's Content-Range by this many bytes
    fail_with: int = 0  # answer the next GETs with this status (e.g. 500), ``failures`` times
    failures: int = 0
    # Redirect requests (any method; "GET" object GETs only, "HEAD", "LIST" listings only)
    # with this status to redirect_to (another host), after letting redirect_skip through;
    # redirect_region is the x-amz-bucket-region the answer names ("": none).
    redirect_status: int = 0
    redirect_what: str = "any"
    redirect_to: str = ""
    redirect_region: str = ""
    redirect_skip: int = 0
    etag: str | None = None  # say this ETag in every answer (the object replaced)
    total: int | None = None  # say this size in every Content-Range (replaced, resized)
    silent: bool = False  # take every request (any method) and never answer it (``held``)
    # Send each GET's answer up to this byte of the object and hold the rest, unanswered,
    # until ``release()`` (or until the client closes its connection or the proxy stops).
    hold_from: int | None = None
    after: int = 0  # let this many GETs pass before any fault above applies
    conditional: bool = False  # fault only GETs made If-Match (a load's, not a plain reader's)


@dataclass
class FaultProxy:
    """A proxy on a loopback port in front of ``upstream`` (host, port); ``root`` is the
    folder the upstream serves, read when answering as a server that ignores ranges."""

    upstream_port: int
    root: Path | None = None
    faults: Faults = field(default_factory=Faults)
    seen: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: socketserver.ThreadingTCPServer | None = None
    _thread: threading.Thread | None = None
    _clients: set[socket.socket] = field(default_factory=set)
    _stopping: threading.Event = field(default_factory=threading.Event)
    # Readable once the proxy stops: wakes every request held unanswered (never read).
    _wake: tuple[socket.socket, socket.socket] | None = None
    # Readable once ``release()`` is called: sends the rest of every answer held mid-way.
    _released: tuple[socket.socket, socket.socket] | None = None
    _holding: int = 0
    _rate: RequestRate | None = None

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        self._wake = socket.socketpair()
        self._released = socket.socketpair()
        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = False
        server.block_on_close = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fault-proxy")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()  # a request held unanswered ends
        assert self._wake is not None
        self._wake[1].send(b"x")
        self._server.shutdown()
        with self._lock:
            for client in self._clients:
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RDWR)
        self._server.server_close()  # joins the handlers
        assert self._thread is not None
        self._thread.join()
        self._server = None
        for end in (*self._wake, *(self._released or ())):
            end.close()
        self._wake = self._released = None

    def release(self) -> None:
        """Send the rest of every answer held mid-way (``hold_from``), and of every later one."""
        assert self._released is not None
        self._released[1].send(b"x")

    def holding(self) -> int:
        """How many answers it holds mid-way now (``hold_from``)."""
        with self._lock:
            return self._holding

    def connections(self) -> int:
        """How many client connections are open now."""
        with self._lock:
            return len(self._clients)

    def held(self) -> int:
        """How many requests it has taken and held unanswered (``silent``) so far."""
        with self._lock:
            return sum(1 for seen in self.seen if seen.fault == "silent")

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # --- one client connection ------------------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        with self._lock:
            self._clients.add(client)
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        reader = client.makefile("rb")
        try:
            while self._serve_one(client, reader, upstream):
                pass
        except OSError:
            pass
        finally:
            reader.close()
            upstream.close()
            with self._lock:
                self._clients.discard(client)
            with contextlib.suppress(OSError):
                client.close()

    def _serve_one(self, client: socket.socket, reader, upstream) -> bool:  # type: ignore[no-untyped-def]
        line = reader.readline()
        if not line:
            return False
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers: list[tuple[str, str]] = []
        while (header := reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = header.decode("latin-1").partition(":")
            headers.append((name.strip(), value.strip()))
        lower = {name.lower(): value for name, value in headers}
        length = int(lower.get("content-length", "0") or 0)
        body = reader.read(length) if length else b""
        is_get = method == "GET" and "list-type=" not in target
        fault = self._take_redirect(method, target) or self._take_fault(
            is_get, "if-match" in lower, target
        )
        with self._lock:
            self.seen.append(Seen(method, target, lower.get("range"), lower.get("if-match"), fault))
            latency = self.faults.latency_s
        if latency:
            time.sleep(latency)
        if fault == "silent":  # the request is taken; the answer never comes
            self._hold(client)
            return False
        if fault == "throttle":
            status = self.faults.throttle_status
            code = "SlowDown" if status == 503 else "TooManyRequests"
            self._send_error(client, status, code)
            return True
        if fault == "redirect":
            self._send_redirect(client, method, target)
            return True
        if fault.startswith("fail"):
            status = self.faults.fail_with or 500
            self._send_error(client, status, ERROR_CODES.get(status, "InternalError"))
            return True
        if fault == "whole":
            assert self.root is not None
            data = (self.root / target.split("?")[0].lstrip("/")).read_bytes()
            head = f'HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\nETag: "whole"\r\n\r\n'
            client.sendall(head.encode() + data)
            return True
        upstream.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for name, value in headers:
            upstream.putheader(name, value)
        upstream.endheaders(body or None)
        answer = upstream.getresponse()
        data = answer.read()
        out = [(k, v) for k, v in answer.getheaders() if k.lower() != "transfer-encoding"]
        if method != "HEAD":  # a HEAD's Content-Length is the object's: it has no body
            out = [(k, v) for k, v in out if k.lower() != "content-length"]
            out.append(("Content-Length", str(len(data))))
        if fault == "misreport":
            out = [
                (k, _shifted(v, self.faults.misreport) if k.lower() == "content-range" else v)
                for k, v in out
            ]
        if fault == "etag":
            out = [(k, f'"{self.faults.etag}"' if k.lower() == "etag" else v) for k, v in out]
        if fault == "total":
            out = [
                (k, _resized(v, self.faults.total or 0) if k.lower() == "content-range" else v)
                for k, v in out
            ]
        head = f"HTTP/1.1 {answer.status} {answer.reason}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in out) + "\r\n"
        if fault == "hold":
            return self._send_held(client, head.encode("latin-1"), data, answer)
        if fault == "reset":
            assert self.faults.reset_after is not None
            client.sendall(head.encode("latin-1") + data[: self.faults.reset_after])
            if self.faults.cleanly:
                client.shutdown(socket.SHUT_WR)
            else:
                time.sleep(0.05)  # most bytes reach the client before the reset does
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
            return False
        client.sendall(head.encode("latin-1") + data)
        return True

    def _send_held(
        self, client: socket.socket, head: bytes, data: bytes, answer: http.client.HTTPResponse
    ) -> bool:
        """The answer up to ``hold_from`` of the object, then, once released, the rest;
        False when the client closed its connection or the proxy stopped first."""
        span = answer.getheader("Content-Range")  # "bytes FIRST-LAST/TOTAL"; none: from 0
        first = int(span.split()[1].partition("-")[0]) if span else 0
        cut = min(len(data), max(0, (self.faults.hold_from or 0) - first))
        client.sendall(head + data[:cut])
        if cut < len(data):
            with self._lock:
                self._holding += 1
            try:
                if not self._hold(client, until_released=True):
                    return False
            finally:
                with self._lock:
                    self._holding -= 1
        client.sendall(data[cut:])
        return True

    def _hold(self, client: socket.socket, until_released: bool = False) -> bool:
        """Wait, answering nothing, until the client closes its connection (a reader that
        gave up, or whose process died) or the proxy stops (False), or with
        ``until_released``, until ``release()`` (True)."""
        assert self._wake is not None and self._released is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake[0], selectors.EVENT_READ)
            if until_released:
                selector.register(self._released[0], selectors.EVENT_READ)
            selector.register(client, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self._released[0]:
                        return True
                    if key.fileobj is not client:
                        return False  # the proxy stops
                    if not client.recv(1, socket.MSG_PEEK):
                        return False  # the client closed its connection
                    # More bytes after a request held: never read, so stop watching them.
                    selector.unregister(client)
        return False

    def _take_redirect(self, method: str, target: str) -> str:
        with self._lock:
            faults = self.faults
            what = "LIST" if "list-type=" in target else method
            if not faults.redirect_status or faults.redirect_what not in ("any", what):
                return ""
            if faults.redirect_skip > 0:
                faults.redirect_skip -= 1
                return ""
            return "redirect"

    def _send_redirect(self, client: socket.socket, method: str, target: str) -> None:
        faults = self.faults
        status = faults.redirect_status
        code = "PermanentRedirect" if status == 301 else "TemporaryRedirect"
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            "<Message>Please send all future requests to this endpoint.</Message></Error>"
        ).encode()
        if method == "HEAD":
            body = b""  # S3 answers a HEAD without a body
        head = f"HTTP/1.1 {status} {http.client.responses[status]}\r\n"
        if faults.redirect_to:
            head += f"Location: {faults.redirect_to}{target}\r\n"
        if faults.redirect_region:
            head += f"x-amz-bucket-region: {faults.redirect_region}\r\n"
        head += f"Content-Type: application/xml\r\nContent-Length: {len(body)}\r\n\r\n"
        client.sendall(head.encode() + body)

    def _take_fault(self, is_get: bool, if_match: bool, target: str) -> str:
        with self._lock:
            faults = self.faults
            if not is_get:  # a listing, a HEAD: only silence touches them, unless conditional
                silenced = faults.silent and faults.after == 0 and not faults.conditional
                return "silent" if silenced else ""
            if faults.conditional and not if_match:
                return ""
            if faults.after > 0:
                faults.after -= 1
                return ""
            if faults.silent:
                return "silent"
            if faults.hold_from is not None:
                return "hold"
            if faults.throttle > 0:
                faults.throttle -= 1
                return "throttle"
            if faults.rate:
                rate = self._rate
                if rate is None or (rate.rate, rate.burst) != (faults.rate, faults.burst):
                    rate = self._rate = RequestRate(faults.rate, faults.burst)
                if not rate.admit(prefix_of(target)):
                    return "throttle"
            if faults.failures > 0:
                faults.failures -= 1
                return "fail"
            if faults.ignore_ranges:
                return "whole"
            if faults.resets > 0:
                faults.resets -= 1
                return "reset"
            if faults.misreport:
                return "misreport"
            if faults.etag is not None:
                return "etag"
            if faults.total is not None:
                return "total"
            return ""

    @staticmethod
    def _send_error(client: socket.socket, status: int, code: str) -> None:
        message = ERROR_MESSAGES.get(code, "We encountered an internal error.")
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error>"
        ).encode()
        reason = http.client.responses.get(status, "Error")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        client.sendall(head.encode() + body)


# S3's code for each status a test asks the proxy to fail with, and its message.
ERROR_CODES = {
    403: "AccessDenied",
    412: "PreconditionFailed",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "GatewayTimeout",
}
ERROR_MESSAGES = {
    "SlowDown": "Please reduce your request rate.",
    "TooManyRequests": "Please reduce your request rate.",
    "AccessDenied": "Access Denied",
    "PreconditionFailed": "At least one of the pre-conditions you specified did not hold",
}


def _resized(content_range: str, total: int) -> str:
    span, _, _ = content_range.partition("/")
    return f"{span}/{total}"


def _shifted(content_range: str, by: int) -> str:
    unit, _, spec = content_range.partition(" ")
    span, _, total = spec.partition("/")
    first, _, last = span.partition("-")
    return f"{unit} {int(first) + by}-{int(last) + by}/{total}"
