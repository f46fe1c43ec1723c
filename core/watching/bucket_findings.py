"""Findings of a program that streams its model from a bucket, from its connections to the
endpoint (``connections``): one connection at a time, bytes fetched again, or only part of
the model arriving."""

from __future__ import annotations

from modelmon.core.storage.connection import CLIENT_CONNECTIONS
from modelmon.core.units import human_bytes
from modelmon.core.watching.result import Finding, WatchResult

# Below this the model is too small for one connection's pace to matter.
ONE_CONNECTION_FROM = 64 << 20
REFETCHED_ABOVE = 1.10  # of the model's bytes arriving: parts were fetched again
PARTIAL_BELOW = 0.90  # of the model's bytes arriving: not a whole load

# One source of the number of connections: recommend's measurement of the endpoint, which
# starts where a parallel client does (``CLIENT_CONNECTIONS``); a fixed number here would
# contradict what it measures (the watch said 16 where recommend picked 2).
CONCURRENT_FIX = (
    "stream with N concurrent ranged GETs, N the connections `modelmon recommend URL` "
    "measures this endpoint serves best (its search starts from "
    f"{CLIENT_CONNECTIONS}, what a parallel client opens untuned): Run:ai Model Streamer "
    "with RUNAI_STREAMER_CONCURRENCY=N (vLLM: --load-format runai_streamer "
    "--model-loader-extra-config '{\"concurrency\": N}'), boto3 with "
    "TransferConfig(max_concurrency=N), or modelmon's ranged strategy"
)


def one_connection(result: WatchResult) -> Finding | None:
    found = result.connections
    if found is None or found.peak_open != 1 or found.received_bytes < ONE_CONNECTION_FROM:
        return None
    text = (
        f"{result.loader.label} read {human_bytes(found.received_bytes)} from "
        f"{found.endpoint} over one connection at a time: a bucket serves each connection at "
        "a bounded pace (S3: about 100 MB/s), so one connection caps the load."
    )
    evidence = {"peak_connections": 1, "connections": found.seen, "bytes": found.received_bytes}
    return Finding("one-connection", text, evidence, CONCURRENT_FIX)


def refetched(result: WatchResult) -> Finding | None:
    found = result.connections
    if found is None or result.model_bytes <= 0:
        return None
    ratio = found.received_bytes / result.model_bytes
    if ratio <= REFETCHED_ABOVE:
        return None
    text = (
        f"{human_bytes(found.received_bytes)} arrived from {found.endpoint} for a model of "
        f"{human_bytes(result.model_bytes)}: {ratio:.2f}× its bytes, so parts were fetched "
        "again (retries after throttling or dropped connections, or a loader reading what it "
        "already had)."
    )
    evidence = {"bytes": found.received_bytes, "model_bytes": result.model_bytes}
    fix = (
        "fetch each byte once: one pass over the objects in large ranged GETs; if the "
        "endpoint throttles (503 SlowDown), fewer connections"
    )
    return Finding("re-fetched", text, evidence, fix)


def partial_stream(result: WatchResult) -> Finding | None:
    found = result.connections
    if found is None or result.model_bytes <= 0:
        return None
    fraction = found.received_bytes / result.model_bytes
    if fraction >= PARTIAL_BELOW:
        return None
    text = (
        f"only {fraction:.1%} of the model ({human_bytes(result.model_bytes)}) arrived over "
        f"the connections to {found.endpoint}: a lazy load (the rest is read on first use), "
        "or a cache outside this machine's view; its time says nothing about the whole model."
    )
    evidence = {"fraction": round(fraction, 6), "bytes": found.received_bytes}
    fix = "time a load that touches every tensor it loads"
    return Finding("partial-read", text, evidence, fix)


BUCKET_RULES = (one_connection, refetched, partial_stream)
