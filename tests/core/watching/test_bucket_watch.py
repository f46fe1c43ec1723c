"""Watching a program that streams its model from a bucket: its bytes arrive over its
connections to the endpoint, not through the page cache. A real S3 server on loopback
(rclone serve s3), the program botocore's ranged GETs, the watch counting what the kernel
says each connection received."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import Watch, open_model, parse_configuration, run_for
from modelmon.core.errors import OptionsError
from modelmon.core.measuring.object_search import DEFAULT_CONNECTIONS
from modelmon.core.watching import bucket_findings
from modelmon.core.watching.findings import findings

from ...object_store import BUCKET

# Reads the object with ranged GETs over CONNECTIONS pooled connections (botocore, as boto3
# users do; the AWS environment is the test's), then keeps them open a moment, as a server
# that has loaded does: a connection closed between two of the watch's looks takes its
# count with it (see connections.py).
PROGRAM = """
import os, sys, threading, time
import botocore.session
from botocore.config import Config
bucket, key, size, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
session = botocore.session.get_session()
def part(i):
    client = session.create_client("s3", config=Config(s3={"addressing_style": "path"}))
    first, last = i * size // n, (i + 1) * size // n - 1
    body = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{last}")["Body"]
    assert len(body.read()) == last - first + 1
    held.append(client)
held = []
threads = [threading.Thread(target=part, args=(i,)) for i in range(n)]
[t.start() for t in threads]; [t.join() for t in threads]
time.sleep(1.0)
"""
KEY = "large/model.safetensors"


@pytest.mark.parametrize("connections", [1, 3])
def test_a_streamed_model_arrives_over_the_connections_the_watch_counts(
    rclone_s3: SimpleNamespace, connections: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = open_model(f"s3://{BUCKET}/large/")
    (obj,) = model.files
    command = [sys.executable, "-c", PROGRAM, BUCKET, KEY, str(obj.size), str(connections)]
    result = Watch(command, model=model.path).run()
    assert result.status == "exited" and result.exit_code == 0
    found = result.connections
    assert found is not None and found.endpoint == rclone_s3.server.endpoint
    assert found.peak_open == connections == found.seen
    # The bodies, and each answer's status line and headers (a few hundred bytes each).
    assert obj.size <= found.received_bytes <= obj.size + 2048 * connections
    assert result.bytes_read == found.received_bytes == result.arrived_bytes
    assert result.model_bytes == model.file_bytes and result.saw_model
    assert result.cache is not None and result.cache.nothing_local
    assert result.first_byte_s is not None and result.last_byte_s is not None
    codes = {finding.code for finding in result.findings}
    assert "not-cold" not in codes  # nothing of a bucket is cached here to be cold or not
    # Under 64 MiB one connection's pace does not matter: no one-connection finding.
    assert "one-connection" not in codes and "re-fetched" not in codes
    monkeypatch.setattr(bucket_findings, "ONE_CONNECTION_FROM", 0)
    again = {finding.code: finding for finding in findings(result)}
    assert ("one-connection" in again) == (connections == 1)
    if connections == 1:  # one source of the number: recommend's measurement of the endpoint
        fix = again["one-connection"].fix
        assert "RUNAI_STREAMER_CONCURRENCY=N" in fix and "modelmon recommend URL" in fix
        assert f"starts from {DEFAULT_CONNECTIONS}," in fix and "16" not in fix


def test_a_program_run_on_a_bucket_is_judged_by_what_arrived(
    rclone_s3: SimpleNamespace, tmp_path: Path
) -> None:
    model = open_model(f"s3://{BUCKET}/large/")
    size = model.files[0].size
    script = tmp_path / "stream.py"
    script.write_text(PROGRAM)
    program = parse_configuration(f"cmd: {sys.executable} {script} {BUCKET} {KEY} {size} 2")
    outcome = run_for(model, program, "cold").run()
    result = outcome.result
    assert result.status == "ok", result.error
    # The bodies and each answer's headers: no one else's connection (this process's own
    # header GET, closing as the watch begins) is counted.
    assert size <= result.bytes <= size + 4096


def test_a_bucket_is_watched_alone(rclone_s3: SimpleNamespace, tmp_path: Path) -> None:
    with pytest.raises(OptionsError, match="watched alone"):
        Watch(["true"], model=[f"s3://{BUCKET}/large/", str(tmp_path)])


def test_a_sharded_bucket_model_is_named_by_its_prefix_and_objects(
    rclone_s3: SimpleNamespace,
) -> None:
    """Its arrivals are of its 3 objects' bytes: named by the prefix, never by its index (a
    few KiB, which was listed with the objects' 2.20 GB as its size)."""
    from modelmon.core.output.watch import render_watch
    from modelmon.core.watching.assemble import bucket_file
    from modelmon.core.watching.naming import bucket_arrivals

    model = open_model(f"s3://{BUCKET}/sharded/")
    arrivals = bucket_arrivals(model, attached=False)
    assert arrivals.url == f"s3://{BUCKET}/sharded/" and arrivals.objects == 3
    assert arrivals.size == model.file_bytes
    seen = bucket_file(arrivals)
    assert seen.storage.startswith("3 objects in a bucket at ")
    arrivals.close()
    result = Watch(["true"], model=model).run()
    file_line = next(line for line in render_watch(result).splitlines() if line.startswith("file"))
    assert file_line.startswith("file:     sharded/  ") and "index" not in file_line
