"""Ranks on one node from a bucket: how many GETs each mode makes of it, seen by the bucket."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from modelmon.core import RanksRun, open_model
from modelmon.core.options import LoadOptions

MODEL = "s3://models/sharded/"


def _load_gets(proxy: Any) -> int:
    """GETs of loads (made If-Match; an opening's are not) the bucket answered."""
    return sum(1 for seen in proxy.seen if seen.method == "GET" and seen.if_match)


def test_whole_ranks_each_stream_the_objects_and_one_reader_streams_them_once(
    faulty_s3: SimpleNamespace,
) -> None:
    model = open_model(MODEL)
    options = LoadOptions(threads=2, chunk=64 << 10)
    one = RanksRun(model, "ranged", options, ranks=2, mode="one-reader").run()
    once = _load_gets(faulty_s3.proxy)
    assert one.status == "ok", one.error
    assert one.reader is not None and one.reader.bytes == model.total_bytes
    assert [rank.read_bytes for rank in one.ranks] == [0, 0]  # they map the node's copy
    assert one.read_bytes == model.total_bytes
    assert one.reader.object_reads is not None and once == one.reader.object_reads.requests > 0

    whole = RanksRun(model, "ranged", options, ranks=2, mode="whole").run()
    assert whole.status == "ok", whole.error
    assert [rank.read_bytes for rank in whole.ranks] == [model.total_bytes] * 2
    assert _load_gets(faulty_s3.proxy) - once == 2 * once  # every rank streams every object
