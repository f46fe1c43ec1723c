"""A config file tells one story: its sections are made from one record of the answer, so that
the figures, the run counts and the verification of a configuration agree everywhere."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

import pytest

from modelmon.core.measuring import judge
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.output.config import recommendation_document
from modelmon.core.output.config_text import render
from modelmon.core.system.cache import CacheState

from ..measuring.records import advice, candidate, engine_run
from .test_explain import record

# The lead's case: the search ran modelmon's best once (1,748 MB/s), the rounds beside the
# user's loader three times (median 1,875 MB/s) and paired them with the loader's.
SEARCHED = candidate("sequential", 1748, workers=4, chunk=16 << 20)
IN_ROUNDS = dataclasses.replace(
    candidate("sequential", 1700, 1875, 1910, workers=4, chunk=16 << 20),
    verdict=judge([2.1, 2.0, 2.2]),
)
LOADER = engine_run("safetensors", 860, 871, 880)


@pytest.fixture
def model(sharded_model: Path) -> Model:
    return open_model(sharded_model)


def written(model: Model, rounds: Candidate) -> tuple[dict[str, Any], str]:
    rec = record(model, winner=SEARCHED, ranked=(SEARCHED,))
    told = advice(LOADER, "safetensors", (), None, rounds)
    text = render(recommendation_document(rec, "/abs/m.toml", advice=told))
    return tomllib.loads(text), text


def one_story(document: dict[str, Any]) -> None:
    """Every section's figures of the configuration the file holds agree."""
    evidence, told = document["evidence"], document["recommendation"]
    median, runs = evidence["median_mbps"], evidence["runs"]
    if told["in_config"]:
        assert (told["median_mbps"], told["runs"]) == (median, runs)
    best = next(line for line in document["explanation"] if line.startswith("Best: "))
    said = "(1 cold run)" if runs == 1 else f"(median of {runs} "  # one run is its own
    assert f" at {median:.0f} MB/s {said}" in best, best
    short = [line for line in document["explanation"] if line.startswith("Only ")]
    assert all(line.startswith(f"Only {runs} ") for line in short), short
    loader = document.get("loader")
    if loader is not None:
        assert (loader["modelmon_mbps"], loader["modelmon_runs"]) == (median, runs)
    own = document["apply_evidence"]["modelmon"]
    assert f": {median:.0f} MB/s" in own and (" runs" not in own or f", {runs} runs" in own)
    unverified = [line for line in document["explanation"] if "verified cold" in line]
    assert bool(unverified) == (not evidence["all_runs_verified"]), unverified


def test_the_rounds_beside_the_loader_are_the_evidence_everywhere(model: Model) -> None:
    document, text = written(model, IN_ROUNDS)
    one_story(document)
    assert document["evidence"]["runs"] == 3 and document["evidence"]["median_mbps"] == 1875.0
    assert "1748" not in text  # the search's one entry run is no figure of the file's


def test_rounds_not_verified_cold_are_said_so_in_every_section(model: Model) -> None:
    unseen = CacheState("cold", 0.4, 1.0, False, False, "cachestat", "pages were mapped")
    rounds = dataclasses.replace(
        IN_ROUNDS, results=[dataclasses.replace(r, cache=unseen) for r in IN_ROUNDS.results]
    )
    document, text = written(model, rounds)
    one_story(document)
    assert document["evidence"]["all_runs_verified"] is False
    assert "measured from a\n# verified cold cache" not in text


def test_a_file_in_ram_is_never_said_to_be_measured_from_a_cold_cache(
    model_without_readahead: Path,
) -> None:
    """tmpfs: its runs asked for a cold cache that a file in RAM cannot be put in."""
    in_ram = open_model(model_without_readahead)
    stuck = CacheState("cold", 1.0, 1.0, False, False, "cachestat", "the file lives in RAM")
    best = candidate("sequential", 3000, 3100, 3050, workers=4)
    best.results[:] = [dataclasses.replace(r, cache=stuck) for r in best.results]
    rec = record(in_ram, winner=best, ranked=(best,))
    text = render(recommendation_document(rec, "/abs/m.toml"))
    evidence = tomllib.loads(text)["evidence"]
    assert evidence["cache"].startswith("in RAM") and evidence["all_runs_verified"] is False
    assert "file that lives in RAM (tmpfs), which cannot be made cold" in text
    assert "asked for a cold" not in text and "verified cold cache" not in text


def test_the_alternatives_rank_after_the_pick_as_the_ranking_shows_them(model: Model) -> None:
    """On a loopback bucket a plain download (515 MB/s) was picked over 16 connections
    (534 MB/s, within noise): the app ranked the pick 1 and the other 2, but the file said
    rank = 1 of the other, ranked by median."""
    picked = candidate("ranged", 479, 515, 569, threads=1, chunk=1 << 30)
    faster = candidate("ranged", 501, 534, 558, threads=16, chunk=16 << 20)
    rec = record(model, winner=picked, ranked=(faster, picked))
    document = tomllib.loads(render(recommendation_document(rec, "/abs/m.toml")))
    ranks = [(a["spec"], a["rank"]) for a in document["alternatives"]]
    assert ranks == [(faster.spec, 2)]


def test_an_alternative_stopped_before_any_byte_is_given_no_bound(model: Model) -> None:
    """Walk 22: an alternative stopped before any byte arrived was written with median_mbps =
    0.0, "the bound it stayed under": a rate of 0 bounds nothing."""
    picked = candidate("sequential", 900, 910, 890, workers=4, chunk=16 << 20)
    stopped = candidate("mmap", workers=8)
    stopped.stopped_below_mbps, stopped.ended = 0.0, "cut early"
    stopped.reason = "cut early: on course for far longer than the leader"
    rec = record(model, winner=picked, ranked=(picked, stopped))
    document = tomllib.loads(render(recommendation_document(rec, "/abs/m.toml")))
    [row] = document["alternatives"]
    assert "bound it stayed under" not in row["note"], row
    assert row["note"] == (
        "cut early: on course for far longer than the leader: stopped before any byte "
        "arrived, so median_mbps is no rate"
    ), row
