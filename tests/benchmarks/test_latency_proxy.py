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
    assert starter.returncode == 1 and starter.stdout.split(), starter.stderr
    assert _gone(int(starter.stdout.split()[0]))


def test_a_request_rate_per_prefix_is_a_token_bucket() -> None:
    from benchmarks.latency_proxy import RequestRate, prefix_of

    rate = RequestRate(4.0, 2.0)
    assert [rate.admit("/m/a", now=10.0) for _ in range(3)] == [True, True, False]
    assert rate.admit("/m/b", now=10.0)  # another prefix has its own tokens
    assert not rate.admit("/m/a", now=10.2)  # 0.8 of a token back: not one yet
    assert rate.admit("/m/a", now=10.3)  # a refused request took none
    assert (rate.admitted, rate.throttled) == (4, 2)
    assert prefix_of("/models/bench/model.safetensors?x-id=GetObject") == "/models/bench"


def test_the_proxy_answers_slow_down_above_the_rate_and_keeps_the_connection(
    upstream: str,
) -> None:
    import http.client

    with latency_proxy(upstream, 0.0, rate=0.5, burst=2) as endpoint:
        host, port = endpoint.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            answers = []
            for path in ("/m/a", "/m/b", "/m/c", "/other/a"):
                connection.request("GET", path)
                answer = connection.getresponse()
                answers.append((answer.status, answer.read()))
        finally:
            connection.close()
    assert [status for status, _ in answers] == [200, 200, 503, 200]
    assert answers[0][1] == BODY and b"<Code>SlowDown</Code>" in answers[2][1]


def test_the_proxy_paces_all_connections_together(upstream: str) -> None:
    with latency_proxy(upstream, 0.0, total_mbps=50.0) as endpoint:
        started = time.monotonic()
        got: list[bytes] = []

        def fetch() -> None:
            with urllib.request.urlopen(endpoint, timeout=30) as answer:
                got.append(answer.read())

        readers = [threading.Thread(target=fetch) for _ in range(2)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
        took = time.monotonic() - started
    assert got == [BODY, BODY]
    # 10 MiB in all at 50 MB/s: slower than that it may be, never faster.
    assert took >= (2 * len(BODY) - (1 << 19)) / 50e6
