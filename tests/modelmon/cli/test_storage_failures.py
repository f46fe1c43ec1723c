"""A bucket that fails under a verb, end to end through a fault proxy on loopback: an
endpoint that takes the request and never answers is said at once on a terminal and given up
on at the storage timeout; a failure in a load's worker ends the verb as the same failure
while opening does (exit 8, the storage's own words, no worker, no class name)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
from types import SimpleNamespace

import pytest

from ...object_store import BUCKET
from .conftest import MODELMON

STORAGE_FAILED = 8
URL = f"s3://{BUCKET}/large/"
OBJECT = f"{URL}model.safetensors"
TIMEOUT_HINT = "--storage-timeout SECONDS or MODELMON_STORAGE_TIMEOUT waits longer"


def run_on_a_terminal(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    """(exit code, stdout, what the terminal showed): ``modelmon`` with its stderr a
    pseudo-terminal, as a person at one sees it."""
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [*MODELMON, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower
    ) as process:
        os.close(follower)
        shown = bytearray()
        try:
            while chunk := os.read(leader, 4096):
                shown += chunk
        except OSError:  # EIO: every end of the terminal in the child's tree is closed
            pass
        finally:
            os.close(leader)
        assert process.stdout is not None
        out = process.stdout.read()
        code = process.wait(timeout)
    return code, out.decode(), shown.decode().replace("\r\n", "\n")


def test_an_endpoint_that_never_answers_is_said_at_once_and_given_up_on(
    faulty_s3: SimpleNamespace,
) -> None:
    faulty_s3.proxy.faults.silent = True  # every request taken, none answered
    endpoint = faulty_s3.proxy.endpoint
    code, out, shown = run_on_a_terminal("inspect", URL, "--storage-timeout", "3")
    lines = shown.splitlines()
    assert code == STORAGE_FAILED and out == ""
    assert lines[0] == f"modelmon: waiting for {endpoint} (no answer yet)…", shown
    assert lines[-1] == (
        f"modelmon: {URL}: no answer from {endpoint}; nothing arrived within the storage "
        f"timeout, 3 s (1 try; {TIMEOUT_HINT})"
    )


def test_not_on_a_terminal_a_wait_is_said_only_at_its_end(
    modelmon, faulty_s3: SimpleNamespace
) -> None:
    faulty_s3.proxy.faults.silent = True
    done = modelmon("inspect", URL, "--storage-timeout", "1")
    assert done.returncode == STORAGE_FAILED and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"modelmon: {URL}: no answer from ") and TIMEOUT_HINT in line


@pytest.mark.parametrize(
    ("faults", "says"),
    [
        ({"misreport": 16}, r"asked for bytes \d+-\d+, the server sent \d+-\d+$"),
        ({"ignore_ranges": True}, "the server ignores byte ranges"),
        ({"etag": "another"}, 'replaced since it was opened: ETag "another", it was "'),
        ({"total": 123}, "replaced since it was opened: it holds 123 bytes, it held"),
        (
            {"fail_with": 412, "failures": 1000},
            r"replaced since it was opened \(412 PreconditionFailed on If-Match\)",
        ),
        (
            {"fail_with": 500, "failures": 1000},
            r"the endpoint failed \(500 InternalError\)(, after 8 tries|; nothing arrived within)",
        ),
        ({"fail_with": 403, "failures": 1000}, r"these credentials may not read it \(403 Access"),
    ],
    ids=["content-range", "200-for-a-range", "etag", "size", "412", "500", "403"],
)
def test_a_storage_failure_mid_load_ends_load_as_it_would_opening(
    modelmon, faulty_s3: SimpleNamespace, faults: dict[str, object], says: str
) -> None:
    """The model opens (its first GET passes), then every GET of the load's worker fails."""
    faulty_s3.proxy.faults.after = 1
    for name, value in faults.items():
        setattr(faulty_s3.proxy.faults, name, value)
    done = modelmon("load", URL, "--threads", "1", "--storage-timeout", "1")
    last = done.stderr.splitlines()[-1]
    assert done.returncode == STORAGE_FAILED, done.stderr
    assert last.startswith(f"modelmon: {OBJECT}: ") and re.search(says, last), last
    assert "worker" not in done.stderr and not re.search(r"\w+Error: ", done.stderr)
    assert "throttl" not in last.lower()


def test_a_storage_failure_mid_run_ends_bench_as_the_storage_failure(
    modelmon, faulty_s3: SimpleNamespace
) -> None:
    faulty_s3.proxy.faults.after, faulty_s3.proxy.faults.fail_with = 1, 500
    faulty_s3.proxy.faults.failures = 1000
    done = modelmon(
        "bench", URL, "--a", "ranged threads=1", "--b", "ranged threads=2", "-n", "1",
        "--storage-timeout", "1",
    )  # fmt: skip
    last = done.stderr.splitlines()[-1]
    assert done.returncode == STORAGE_FAILED, done.stderr
    assert last.startswith(f"modelmon: {OBJECT}: the endpoint failed (500 InternalError)"), last
    assert "worker" not in done.stderr and not re.search(r"\w+Error: ", done.stderr)


def test_a_storage_failure_mid_search_ends_recommend_as_the_storage_failure(
    modelmon, faulty_s3: SimpleNamespace, tmp_path
) -> None:
    """The plain GETs of the ceilings pass (they are not made If-Match); the first load's
    worker finds the object replaced (412 on If-Match)."""
    faults = faulty_s3.proxy.faults
    faults.conditional, faults.fail_with, faults.failures = True, 412, 1000
    done = modelmon("recommend", URL, "--budget", "10", "-o", str(tmp_path / "m.toml"))
    last = done.stderr.splitlines()[-1]
    assert done.returncode == STORAGE_FAILED, done.stderr
    assert last == (
        f"modelmon: {OBJECT}: the object was replaced since it was opened "
        "(412 PreconditionFailed on If-Match)"
    )
    assert not (tmp_path / "m.toml").exists()
    assert "worker" not in done.stderr and not re.search(r"\w+Error: ", done.stderr)


def test_a_storage_failure_in_the_ceilings_ends_recommend_as_the_storage_failure(
    modelmon, faulty_s3: SimpleNamespace, tmp_path
) -> None:
    faulty_s3.proxy.faults.after, faulty_s3.proxy.faults.fail_with = 1, 403
    faulty_s3.proxy.faults.failures = 1000
    done = modelmon("recommend", URL, "--budget", "10", "-o", str(tmp_path / "m.toml"))
    last = done.stderr.splitlines()[-1]
    assert done.returncode == STORAGE_FAILED, done.stderr
    assert last.startswith(f"modelmon: {OBJECT}: these credentials may not read it (403"), last


def test_a_stop_while_shards_wait_on_a_silent_endpoint_ends_at_once(
    faulty_s3: SimpleNamespace,
) -> None:
    """SIGTERM while every shard's first GET waits for an answer that never comes: the
    command ends (143), not after the shards' tries (8 of 30 s each, with this timeout)."""
    import signal
    import time

    faults = faulty_s3.proxy.faults
    faults.silent, faults.after = True, 1  # the index is read; its shards never answer
    shards = 3
    with subprocess.Popen(
        [*MODELMON, "inspect", f"s3://{BUCKET}/sharded/", "--storage-timeout", "3600"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            while sum(seen.fault == "silent" for seen in faulty_s3.proxy.seen) < shards:
                assert process.poll() is None, process.communicate()
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=60)  # 240 s were it to wait them out
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 143 and out == ""
    assert err == "modelmon: cancelled\n"


def test_a_storage_failure_in_a_rank_ends_load_ranks_as_the_storage_failure(
    modelmon, faulty_s3: SimpleNamespace
) -> None:
    faulty_s3.proxy.faults.after, faulty_s3.proxy.faults.fail_with = 1, 403
    faulty_s3.proxy.faults.failures = 1000
    done = modelmon("load", URL, "--ranks", "2", "--threads", "1")
    last = done.stderr.splitlines()[-1]
    assert done.returncode == STORAGE_FAILED, done.stderr
    assert last.startswith(f"modelmon: {OBJECT}: these credentials may not read it (403"), last
    ranks = [line.split() for line in done.stdout.splitlines() if line.startswith("   ")]
    assert ranks and all(row[1] == "failed" and row[3] == "–" for row in ranks), ranks
