"""A bucket that throttles, under ``load`` as a user runs it: above a request rate it answers
503 SlowDown (as S3 does per prefix), and the load takes that as the bucket's word on its
rate, finishes, and says how it paced itself; a bucket that throttles every request ends
the load in one line that counts the throttles."""

from __future__ import annotations

import json
from types import SimpleNamespace

from ...object_store import BUCKET, STREAMED, STREAMED_BYTES

STORAGE_FAILED = 8
URL = f"s3://{BUCKET}/served/"
# 256 MiB of zeros (a hole on the server's disk): 32 parts of the default 8 MiB.
ZEROS = f"s3://{STREAMED}/model/"


def test_load_with_its_defaults_finishes_on_a_bucket_that_throttles_and_says_its_pace(
    modelmon, faulty_s3: SimpleNamespace
) -> None:
    """Four GETs a second, four at once (the issue's profile), against the default 4
    connections × 8 MiB parts: 32 GETs as planned."""
    faulty_s3.proxy.faults.rate, faulty_s3.proxy.faults.burst = 4.0, 4.0
    done = modelmon("load", ZEROS, "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    reads = data["object_reads"]
    assert data["status"] == "ok" and data["bytes"] == STREAMED_BYTES
    assert reads["throttles"] > 0
    points = reads["pace"]
    assert points[0]["connections"] == 4 and points[0]["part"] == 8 << 20
    assert min(point["connections"] for point in points) < 4
    assert max(point["part"] for point in points) > 8 << 20
    text = modelmon("load", ZEROS, timeout=120)
    assert text.returncode == 0, text.stderr
    (pace,) = [line for line in text.stdout.splitlines() if line.startswith("pace ")]
    assert pace.startswith("pace      paced by ") and "4 connections × 8 MiB at the start" in pace


def test_a_bucket_that_throttles_every_request_ends_load_in_one_line_counting_them(
    modelmon, faulty_s3: SimpleNamespace
) -> None:
    faulty_s3.proxy.faults.after, faulty_s3.proxy.faults.throttle = 1, 100_000
    done = modelmon("load", URL, "--storage-timeout", "3", timeout=120)
    assert done.returncode == STORAGE_FAILED, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"modelmon: {URL}model.safetensors: throttled by the endpoint (503 ")
    thrown = sum(1 for seen in faulty_s3.proxy.seen if seen.fault == "throttle")
    assert line.endswith(f"; {thrown} of {thrown} requests throttled, nothing arrived"), line


def test_a_bucket_that_throttles_every_request_ends_recommend_in_one_line_counting_them(
    modelmon, faulty_s3: SimpleNamespace, tmp_path
) -> None:
    """The curve's first plain read is throttled every time: it stops 2 s after its first
    throttle, and recommend ends there, well within its budget, writing nothing."""
    faulty_s3.proxy.faults.after, faulty_s3.proxy.faults.throttle = 1, 100_000
    out = tmp_path / "m.toml"
    done = modelmon("recommend", URL, "--budget", "60", "-o", str(out), timeout=120)
    assert done.returncode == STORAGE_FAILED, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"modelmon: {URL}model.safetensors: throttled by the endpoint (503 ")
    thrown = sum(1 for seen in faulty_s3.proxy.seen if seen.fault == "throttle")
    assert last.endswith(f"; {thrown} of {thrown} requests throttled, nothing arrived"), last
    assert not out.exists()
