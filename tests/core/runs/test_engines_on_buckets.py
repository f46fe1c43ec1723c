"""Another loader on a bucket: Run:ai Model Streamer's S3 backend streams the model itself,
run as an engine side (watched: its connections to the endpoint, the bytes that arrived),
and raced by recommend where it is installed; the loaders that read files say so."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

from modelmon.core import ENGINES, open_model, run_for
from modelmon.core.configuration import parse_engine

from ...object_store import BUCKET

RUNAI_S3 = importlib.util.find_spec("runai_model_streamer_s3") is not None


def test_which_engines_stream_a_bucket() -> None:
    assert ENGINES["safetensors"].streams_buckets() == "safetensors reads files, not objects"
    runai = ENGINES["runai"].streams_buckets()
    assert (runai is None) == (RUNAI_S3 and ENGINES["runai"].unavailable() is None)


@pytest.mark.skipif(not RUNAI_S3, reason="Run:ai's S3 backend is not installed (./dev bench)")
@pytest.mark.parametrize("prefix", ["single/", "sharded/"])
def test_runai_streams_a_bucket_as_an_engine_side(rclone_s3: SimpleNamespace, prefix: str) -> None:
    model = open_model(f"s3://{BUCKET}/{prefix}")
    engine = parse_engine("runai RUNAI_STREAMER_CONCURRENCY=4")
    outcome = run_for(model, engine, "cold").run()
    result = outcome.result
    assert result.status == "ok", result.error
    # Every byte arrived at least once; a small object's may arrive twice (the streamer
    # reads a header's GET of a whole chunk, then the tensors): said as re-fetched.
    assert model.file_bytes <= result.bytes <= 3 * model.file_bytes
    watched = outcome.watch
    assert watched is not None and watched.connections is not None
    # A small object's connections can each open and close between two looks: seen all
    # the same (the kernel's destroy broadcast), none held at a look.
    assert watched.connections.seen >= 1
    refetched = any(f.code == "re-fetched" for f in watched.findings)
    assert refetched == (result.bytes > 1.1 * model.file_bytes)
