"""The bench's latency proxy: its own process, bytes through it intact, each request held and
each connection paced, and gone with the block or with the process that started it."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.objects_env import latency_proxy

BODY = os.urandom(5 << 20)
REPO = Path(__file__).resolve().parents[2]


class _Bytes(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Bytes)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _children() -> set[int]:
    own = Path(f"/proc/self/task/{os.getpid()}/children").read_text().split()
    return {int(pid) for pid in own}


def _gone(pid: int, within_s: float = 20.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":  # ended, not yet reaped by its parent
            return True
        time.sleep(0.02)
    return False


def test_the_proxy_passes_the_bytes_held_and_paced_from_its_own_process(upstream: str) -> None:
    before = _children()
    with latency_proxy(upstream, 0.05, 50.0) as endpoint:
        (proxy,) = _children() - before  # a process of its own, not threads of this one
        started = time.monotonic()
        with urllib.request.urlopen(endpoint, timeout=30) as answer:
            got = answer.read()
        took = time.monotonic() - started
    assert got == BODY
    # Held 50 ms, then 5 MiB paced to 50 MB/s: slower than that it may be, never faster.
    assert took >= 0.05 + (len(BODY) - (1 << 18)) / 50e6
    assert _gone(proxy)


STARTER = """
import os, sys
from benchmarks.objects_env import latency_proxy
with latency_proxy(sys.argv[1], 0.0) as endpoint:
    children = open(f"/proc/self/task/{os.getpid()}/children").read().split()
    print(children[0], flush=True)
    os._exit(1)  # dies in the block: no finally runs
"""


def test_the_proxy_ends_when_the_process_that_started_it_dies(upstream: str) -> None:
    starter = subprocess.run(
        [sys.executable, "-c", STARTER, upstream],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert starter.returncode == 1, starter.stderr
    assert _gone(int(starter.stdout.split()[0]))
