"""A model in a bucket larger than the memory limit it is loaded under: discard mode streams
it through bounded buffers (real memory cgroups, rclone serve s3 on loopback)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from ...core.system.test_memory_cgroup import REAL
from ...object_store import STREAMED, STREAMED_BYTES

MiB = 1 << 20
LIMIT = 192 * MiB  # under the model's 256 MiB, over a worker's interpreter and HTTP stack


@REAL
def test_discard_streams_a_bucket_model_larger_than_the_memory_limit(
    modelmon, rclone_s3: SimpleNamespace
) -> None:
    url = f"s3://{STREAMED}/model/"
    args = ("load", url, "--discard", "--memory-limit", f"{LIMIT // MiB}Mi", "--json")
    done = modelmon(*args, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "ok" and result["strategy"].startswith("ranged")
    assert result["bytes"] == STREAMED_BYTES
    limited = result["memory_limit"]
    assert limited["limit_bytes"] == LIMIT and not limited["oom_killed"]
    assert 0 < limited["peak_bytes"] <= LIMIT
    # A copy of it would not fit: refused before any GET, in one line.
    refused = modelmon("load", url, "--memory-limit", f"{LIMIT // MiB}Mi", timeout=120)
    assert refused.returncode == 1 and "would not fit in the memory limit" in refused.stderr
