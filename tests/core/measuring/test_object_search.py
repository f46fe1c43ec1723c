"""The ceilings and the search of a model in object storage, against a real S3-compatible
server on loopback: the bucket's curve of plain GETs (connections × part sizes) is the storage
bound; recommend searches connections × part sizes of ranged loads, explains against the
bucket, and writes a config that a load of the bucket applies."""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

from modelmon.core import apply_config, measure, measure_ceilings, open_model, recommend
from modelmon.core.measuring.object_bounds import CURVE_PART, PARTS, plain_get
from modelmon.core.measuring.object_search import curve_best, object_candidates
from modelmon.core.options import MiB
from modelmon.core.output import explain_recommendation as explain
from modelmon.core.output import recommendation_document, write_config
from modelmon.core.units import rate_text

from ...object_store import BUCKET, SECRET_KEY


def test_the_bucket_ceiling_is_the_best_of_a_curve_of_plain_gets(
    rclone_s3: SimpleNamespace,
) -> None:
    """The curve has the points the sweep asks of this model (one object, smaller than a
    16 MiB part: one connection at each part size, then twice the best's connections where
    each has a GET to make); the storage ceiling names the curve's fastest point as its
    setting, and its rate is its own runs of that setting, as many as asked. Its rate is not
    compared with the point's: two readings at different moments of a shared machine."""
    model = open_model(f"s3://{BUCKET}/large/")
    (facts,) = [f.remote for f in model.files if f.remote is not None]
    ceilings = measure_ceilings(model, repeats=1)
    names = {c.name for c in ceilings.items}
    assert names == {
        "sequential_read",
        "parallel_read",
        "storage",
        "memory_fill",
        "memcpy",
        "keeping_read",
    }
    keeping = ceilings.get("keeping_read")
    assert keeping is not None and keeping.spec.endswith("each GET's bytes kept in fresh memory")
    storage = ceilings.get("storage")
    assert storage is not None and storage.verified is None  # no page cache to verify
    parts = [CURVE_PART, *PARTS]
    singles = [f"1 connection(s), {part // MiB} MiB GETs" for part in parts]
    assert [setting for setting, _ in storage.curve[: len(parts)]] == singles
    assert all(rate > 0 for _, rate in storage.curve)
    rates = [rate for _, rate in storage.curve[: len(parts)]]
    single_best = parts[rates.index(max(rates))]
    doubled = f"2 connection(s), {single_best // MiB} MiB GETs"
    assert [s for s, _ in storage.curve[len(parts) :]] == (
        [doubled] if facts.size > single_best else []  # each connection has a GET to make
    )
    best = max(storage.curve, key=lambda point: point[1])[0]
    assert storage.runs == (storage.mbps,) and storage.mbps > 0  # one whole read, as asked
    # The curve's best read whole; its next too only where those fell far short (timing
    # decides here): the bound is the faster, and the spec says each.
    assert storage.whole[0][0] == best and 1 <= len(storage.whole) <= 2
    bound_setting, bound = max(storage.whole, key=lambda point: point[1])
    assert bound == storage.mbps
    which = "best setting" if len(storage.whole) == 1 else "two best settings"
    said = "; ".join(f"{setting}: {rate_text(mbps)}" for setting, mbps in storage.whole)
    assert storage.spec.startswith(
        f"plain GETs of the whole model at the curve's {which}: {said} (curve, "
    ), storage.spec
    assert storage.spec_setting == f"{rate_text(storage.mbps)} at {bound_setting}"
    connections, part = curve_best(ceilings)
    assert f"{connections} connection(s), {part // MiB} MiB GETs" == bound_setting


def test_plain_gets_read_every_byte_once(faulty_s3: SimpleNamespace) -> None:
    model = open_model(f"s3://{BUCKET}/large/")
    faulty_s3.proxy.seen.clear()
    facts = [f.remote for f in model.files if f.remote is not None]
    reading = plain_get(facts, 3, 64 << 10)
    assert reading.mbps > 0
    ranges = sorted(
        tuple(int(x) for x in seen.range.removeprefix("bytes=").split("-"))
        for seen in faulty_s3.proxy.seen
        if seen.method == "GET" and seen.range
    )
    covered = 0
    for first, last in ranges:
        assert first == covered  # no byte twice, none left out
        covered = last + 1
    assert covered == facts[0].size


def test_the_search_space_follows_the_curve(rclone_s3: SimpleNamespace) -> None:
    model = open_model(f"s3://{BUCKET}/large/")
    ceilings = measure_ceilings(model, ("storage",), repeats=1)
    grid = object_candidates(model, ceilings)
    connections, part = curve_best(ceilings)
    parts = -(-model.total_bytes // part)
    assert grid[0].strategy == "ranged" and grid[0].options.chunk == part
    assert grid[0].options.threads == min(connections, parts)
    assert any(c.strategy == "ranged-stream" for c in grid)
    assert [c.role for c in grid].count("baseline") == 1
    assert len({c.spec for c in grid}) == len(grid)


def test_recommend_on_a_bucket_writes_a_config_its_load_applies(
    rclone_s3: SimpleNamespace, tmp_path: Path
) -> None:
    model = open_model(f"s3://{BUCKET}/large/")
    rec = recommend(model, budget_s=15)
    assert rec.storage is None and rec.winner.strategy in ("ranged", "ranged-stream")
    assert all(c.strategy in ("ranged", "ranged-stream") for c in rec.ranked)
    lines = explain(rec)
    assert lines[0].startswith("Measured on this bucket by plain GETs")
    storage = rec.ceilings.get("storage")
    assert storage is not None
    setting, point = max(storage.curve, key=lambda p: p[1])
    # The bound is whole reads at the curve's best setting (and its next, where those fell
    # far short), not that point's short read.
    from modelmon.core.output.comparison import counted_words

    assert (
        counted_words(
            f"whole reads of the model ran at {rate_text(storage.whole[0][1])} at the curve's best "
            f"setting, {setting} ({rate_text(point)} in its short read)"
        )
        in lines[0]
    ), lines[0]
    assert "short reads (the objects' first 1.5 s) ran at " in lines[0]
    assert ": the storage bound" in lines[0] or "is the storage bound" in lines[0]
    # Nothing of a bucket is cached on this machine: no run of it is called cold.
    assert not [line for line in lines if "cold" in line]
    assert any("reads files, not objects" in line for line in rec.absent_peers)
    path = write_config(tmp_path / "modelmon.toml", recommendation_document(rec, "modelmon.toml"))
    assert SECRET_KEY not in path.read_text()
    # Nor in its config file: its evidence started from nothing cached here, never "cold".
    assert "cold" not in path.read_text().lower()
    evidence = tomllib.loads(path.read_text())["evidence"]
    assert evidence["cache"].startswith("none: object storage")
    assert "all_runs_verified" not in evidence  # nothing to verify
    # The file holds the answer's pick: the search's, or the plain download where the answer
    # keeps it (``as_told``), whichever this run measured.
    from modelmon.core.output import as_told

    told = as_told(rec).winner
    chosen = apply_config(path, model)
    assert chosen.strategy == told.strategy and chosen.options == told.options
    result = measure(model, config=path)
    assert result.status == "ok" and result.strategy == told.strategy


def test_a_curve_whose_best_is_the_plain_download_keeps_it_the_baseline(
    sharded_model: Path,
) -> None:
    """One connection of whole-object GETs first on the curve: the first candidate and the
    plain download are one configuration, still the baseline the answer's gain is against."""
    from modelmon.core.measuring.ceiling_records import Ceiling, Ceilings

    curve = (("1 connection(s), 1024 MiB GETs", 400.0), ("4 connection(s), 16 MiB GETs", 300.0))
    storage = Ceiling("storage", 400.0, (400.0,), "plain GETs", None, curve=curve)
    grid = object_candidates(open_model(sharded_model), Ceilings("m", (storage,)))
    assert grid[0].options.threads == 1 and grid[0].options.chunk == 1 << 30
    assert grid[0].role == "baseline"
    assert [c.role for c in grid].count("baseline") == 1
