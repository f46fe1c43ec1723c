"""Loads from object storage (``ranged``, ``ranged-stream``) against real S3-compatible servers
on loopback: the checksum is the same file's on a disk (single and sharded safetensors, GGUF),
in worker processes and in this process, keeping the arrays or discarding them; the requests
are counted and timed; a throttled or cut answer is retried; a replaced object fails the load
saying so; a file strategy on a bucket, a ranged load of a file and a warm cache are refused."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from modelmon.core import load, measure, open_model
from modelmon.core.errors import LoadError, StorageThrottledError
from modelmon.core.options import LoadOptions
from modelmon.core.runs import LoadRun
from modelmon.core.storage import storage_timeout

from ...object_store import BUCKET

MODELS = ("single/", "sharded/", "gguf/", "large-gguf/")


@pytest.fixture(params=["rclone", "moto"])
def s3(
    request: pytest.FixtureRequest, rclone_server: object, moto_server: object
) -> SimpleNamespace:
    """Each test once against rclone serve s3 (200 + Content-Range) and once against moto
    (206); both servers live as long as the session."""
    return request.getfixturevalue(f"{request.param}_s3")  # type: ignore[no-any-return]


def _file_checksum(root: Path, prefix: str) -> str:
    result = measure(root / BUCKET / prefix.rstrip("/"), "sequential", verify=True)
    assert result.status == "ok" and result.checksum is not None
    return result.checksum


@pytest.mark.parametrize("prefix", MODELS)
@pytest.mark.parametrize("strategy", ["ranged", "ranged-stream"])
def test_a_bucket_load_checksums_as_the_file_does(
    s3: SimpleNamespace, prefix: str, strategy: str
) -> None:
    result = measure(f"s3://{BUCKET}/{prefix}", strategy, verify=True, threads=3, chunk=64 << 10)
    assert result.status == "ok", result.error
    assert result.checksum == _file_checksum(s3.root, prefix)
    model = open_model(f"s3://{BUCKET}/{prefix}")
    assert result.bytes == model.total_bytes
    reads = result.object_reads
    assert reads is not None and reads.bytes >= model.total_bytes
    assert reads.requests >= len(model.files) and reads.retries == 0
    assert 1 <= sum(1 for c in reads.connections if c.requests) <= 3
    assert [o.etag for o in result.objects] == [f.remote.etag for f in model.files if f.remote]
    assert result.cache.nothing_local and "nothing is cached" in result.cache.note


def test_discard_streams_through_bounded_memory_and_checksums(s3: SimpleNamespace) -> None:
    result = measure(
        f"s3://{BUCKET}/large/", "ranged", verify=True, discard=True, threads=2, chunk=64 << 10
    )
    assert result.status == "ok", result.error
    assert result.checksum == _file_checksum(s3.root, "large/")


def test_the_library_loads_a_bucket_into_this_process(s3: SimpleNamespace) -> None:
    from safetensors.numpy import load_file

    arrays = load(f"s3://{BUCKET}/single/", threads=2, chunk=32 << 10)  # ranged: the default
    expected = load_file(str(s3.root / BUCKET / "single" / "model.safetensors"))
    assert arrays.keys() == expected.keys()
    for name, array in expected.items():
        np.testing.assert_array_equal(arrays[name], array)


def test_a_file_strategy_on_a_bucket_and_a_ranged_load_of_a_file_are_refused(
    rclone_s3: SimpleNamespace,
) -> None:
    with pytest.raises(LoadError, match="object storage: use ranged or ranged-stream"):
        measure(f"s3://{BUCKET}/single/", "sequential")
    with pytest.raises(LoadError, match="is a file: it reads objects"):
        measure(rclone_s3.root / BUCKET / "single", "ranged")
    with pytest.raises(LoadError, match="no page cache on this machine to warm"):
        measure(f"s3://{BUCKET}/single/", "ranged", cache="warm")


def test_throttling_and_a_cut_body_are_retried_and_counted(faulty_s3: SimpleNamespace) -> None:
    model = open_model(f"s3://{BUCKET}/large/")  # opened before the faults
    faulty_s3.proxy.faults.throttle = 2
    faulty_s3.proxy.faults.reset_after = 100_000
    faulty_s3.proxy.faults.resets = 1
    result = LoadRun(model, "ranged", LoadOptions(threads=2, chunk=256 << 10, verify=True)).run()
    assert result.status == "ok", result.error
    assert result.checksum == _file_checksum(faulty_s3.root, "large/")
    reads = result.object_reads
    assert reads is not None
    # The throttled parts are asked again (joined where they follow each other), the cut
    # body resumed.
    assert reads.throttles == 2 and reads.resumed == 1 and 2 <= reads.retries <= 3


def test_a_load_throttled_to_failure_counts_every_throttle(faulty_s3: SimpleNamespace) -> None:
    """A bucket that throttles every read fails the load within the storage timeout, in the
    storage's words, with each throttled answer counted in its requests."""
    model = open_model(f"s3://{BUCKET}/sharded/")  # opened before the faults
    faulty_s3.proxy.faults.throttle = 10**6
    faulty_s3.proxy.faults.conditional = True  # every read of the load, none of the opening
    with storage_timeout(1):
        result = LoadRun(model, "ranged", LoadOptions(threads=2, chunk=64 << 10)).run()
    assert result.status == "failed"
    assert isinstance(result.storage_error, StorageThrottledError), result.error
    throttled = sum(1 for seen in faulty_s3.proxy.seen if seen.fault == "throttle")
    reads = result.object_reads
    assert reads is not None and throttled > 2
    assert reads.throttles == reads.requests == throttled and reads.bytes == 0


def test_an_object_replaced_mid_load_fails_the_load_saying_so(
    moto_s3: SimpleNamespace,
) -> None:
    model = open_model(f"s3://{BUCKET}/single/")
    original = (moto_s3.root / BUCKET / "single" / "model.safetensors").read_bytes()
    changed = bytearray(original)
    changed[-1] ^= 0xFF  # same size, other bytes: a new ETag
    moto_s3.server.put(BUCKET, "single/model.safetensors", bytes(changed))
    try:
        result = LoadRun(model, "ranged", LoadOptions(threads=2, chunk=64 << 10)).run()
    finally:
        moto_s3.server.put(BUCKET, "single/model.safetensors", original)
    assert result.status == "failed"
    assert result.error is not None and "replaced since it was opened" in result.error


def test_a_cancel_ends_a_slow_bucket_load_at_once(faulty_s3: SimpleNamespace) -> None:
    """At once: on the cancel, not when the load ends. The workers are frozen as it is
    asked, so the load cannot end by itself: a run that waited for them never ends (the
    join's 30 s fail it)."""
    model = open_model(f"s3://{BUCKET}/large/")
    faulty_s3.proxy.faults.latency_s = 0.5  # every GET: the load would take many seconds
    run = LoadRun(model, "ranged", LoadOptions(threads=1, chunk=4096))
    started = threading.Event()
    run.on_start = lambda _: started.set()
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(run.run()))
    thread.start()
    assert started.wait(60)
    for pid in run.worker_pids().values():
        os.kill(pid, signal.SIGSTOP)
    run.cancel()
    thread.join(30)
    assert not thread.is_alive()
    assert getattr(outcome[0], "status", None) == "cancelled"


def test_a_killed_worker_fails_a_bucket_load_at_once(faulty_s3: SimpleNamespace) -> None:
    """A worker killed mid-load (the OOM killer's SIGKILL) ends the run, named with its
    signal, and its sibling is stopped, not waited out: frozen (SIGSTOP) as its brother is
    killed, the sibling can never end the load, so a run that waited for it never ends (the
    suite's timeout fails it)."""
    model = open_model(f"s3://{BUCKET}/large/")
    faulty_s3.proxy.faults.latency_s = 0.2  # every GET: the load would take many seconds
    run = LoadRun(model, "ranged", LoadOptions(workers=2, threads=1, chunk=4096))

    def kill_worker_1(_: LoadRun) -> None:
        os.kill(run.worker_pids()[0], signal.SIGSTOP)
        os.kill(run.worker_pids()[1], signal.SIGKILL)

    run.on_start = kill_worker_1
    result = run.run()
    assert result.status == "failed"
    assert (result.error or "").startswith(f"worker 1 (pid {run.worker_pids()[1]}) was killed")
    for pid in run.worker_pids().values():
        assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)


def _state(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(line for line in status.splitlines() if line.startswith("State:"))


def test_a_storage_failure_in_a_worker_reaches_the_caller_typed(
    faulty_s3: SimpleNamespace,
) -> None:
    """measure's result carries the worker's StorageError, its line the storage's own; load
    raises it. The JSON has the line, and no object."""
    from modelmon.core.errors import StorageAccessError
    from modelmon.core.output import dumps

    model = open_model(f"s3://{BUCKET}/large/")  # opened before the faults
    faulty_s3.proxy.faults.fail_with, faulty_s3.proxy.faults.failures = 403, 1000
    result = measure(model, "ranged", threads=1)
    assert result.status == "failed" and isinstance(result.storage_error, StorageAccessError)
    assert result.error == str(result.storage_error)
    assert result.error.startswith(f"s3://{BUCKET}/large/model.safetensors: these credentials")
    document = result.to_dict()
    assert "storage_error" not in document and document["error"] == result.error
    dumps(document)
    with pytest.raises(StorageAccessError):
        load(model, threads=1)
