"""Cold means verified cold: a run that did not start from a verified cold cache (a model in
RAM, on tmpfs, cannot) is never called cold, in the explanation, the config file's comments
(the app's headline: tests/gui/state/test_recommendation_view.py)."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from modelmon.core.measuring.ceiling_records import Ceiling, Ceilings
from modelmon.core.measuring.recommend import BudgetUse, Recommendation, recommend
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.output.config import recommendation_document
from modelmon.core.output.config_text import render
from modelmon.core.output.explain import explain
from modelmon.core.output.run_words import runs_words
from modelmon.core.system.cache import CacheState
from modelmon.core.system.storage import storage_facts

from ..measuring.records import candidate

IN_RAM = CacheState(
    "cold",
    1.0,
    1.0,
    False,
    True,
    "cachestat",
    "100.0% still resident after eviction: the file lives in RAM (tmpfs), it cannot be made cold",
)
# What may be said of runs that were not cold: every phrase with "cold" in it says they
# were not.
NOT_COLD = re.compile(
    r"(not|none) verified cold|cannot be made cold|did not (always )?start from a verified cold"
    r"|None of the pick's runs started from a verified cold cache|asked for a cold\s*#?\s*cache"
)


def called_cold(text: str) -> list[str]:
    """The places ``text`` calls something cold, once the phrases that deny it are gone."""
    rest = NOT_COLD.sub("", text)
    return [rest[max(0, m.start() - 60) : m.end() + 20] for m in re.finditer("cold", rest)]


def in_ram(rec: Recommendation) -> Recommendation:
    """``rec`` with every run of every candidate, and the ceilings, not verified cold."""
    for c in (*rec.ranked, *([rec.duel.other] if rec.duel else [])):
        c.results[:] = [dataclasses.replace(r, cache=IN_RAM) for r in c.results]
    ceilings = Ceilings(
        "m", tuple(dataclasses.replace(c, verified=False) for c in rec.ceilings.items)
    )
    return dataclasses.replace(rec, ceilings=ceilings)


@pytest.fixture
def recorded(sharded_model: Path) -> Recommendation:
    best = candidate("sequential", 1000.0, 1010.0, workers=4)
    plain = candidate("sequential", 900.0, workers=4)
    ceilings = Ceilings(
        "m",
        (
            Ceiling("sequential_read", 500.0, (500.0,), "one reader", True),
            Ceiling("parallel_read", 1400.0, (1400.0,), "four readers", True),
        ),
    )
    return Recommendation(
        model=open_model(sharded_model),
        winner=best,
        ranked=(best, plain),
        ceilings=ceilings,
        usable_ram=10**10,
        budget=BudgetUse(given_s=60.0, elapsed_s=58.0),
    )


def test_runs_are_called_cold_only_when_each_was_verified_cold(recorded: Recommendation) -> None:
    cold = recorded.winner.results
    assert runs_words(cold) == "2 cold runs"
    warm = [dataclasses.replace(r, cache=IN_RAM) for r in cold]
    assert runs_words(warm) == "2 runs (none verified cold)"
    assert runs_words([cold[0], warm[1]]) == "2 runs (1 not verified cold)"


def test_a_recommendation_in_ram_is_never_called_cold(recorded: Recommendation) -> None:
    assert called_cold(" ".join(explain(recorded)))  # the measured-cold one says so
    rec = in_ram(recorded)
    text = " ".join(explain(rec))
    assert called_cold(text) == [], text
    assert "the file lives in RAM (tmpfs)" in text  # and it says why it is not


def test_the_config_comment_says_cold_only_of_verified_evidence(recorded: Recommendation) -> None:
    verified = render(recommendation_document(recorded, "m.toml"))
    assert "measured from a\n# verified cold cache" in verified
    document = recommendation_document(in_ram(recorded), "m.toml")
    assert document["evidence"]["all_runs_verified"] is False
    comments = "\n".join(line for line in render(document).splitlines() if line.startswith("#"))
    assert called_cold(comments) == [], comments


SHM = Path("/dev/shm")


@pytest.mark.skipif(
    not SHM.is_dir() or storage_facts(SHM).fs_type != "tmpfs", reason="needs /dev/shm on tmpfs"
)
def test_a_model_on_tmpfs_is_described_without_cold() -> None:
    """The real search on a model in /dev/shm: its progress, explanation and config file."""
    folder = SHM / f"modelmon-test-{os.getpid()}"
    folder.mkdir()
    try:
        path = write_safetensors_model(folder, layers=1, hidden=256, vocab=2048)
        said: list[str] = []
        rec = recommend(open_model(path), budget_s=3, workers=2, peers=False, progress=said.append)
        assert not any(r.cache.cold for r in rec.winner.results)
        config = render(recommendation_document(rec, "m.toml"))
        comments = [line for line in config.splitlines() if line.startswith("#")]
        text = "\n".join([*said, *explain(rec), *comments])
        assert called_cold(text) == [], text
        assert "all_runs_verified = false" in config
    finally:
        for child in folder.iterdir():
            child.unlink()
        folder.rmdir()
