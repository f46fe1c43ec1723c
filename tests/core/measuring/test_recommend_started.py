"""A recommendation's budget bounds the whole search, counted from when its caller started."""

from __future__ import annotations

import time
from pathlib import Path

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceilings import measure_ceilings
from modelmon.core.measuring.recommend import recommend
from modelmon.core.model.formats import open_model
from modelmon.core.options import LoadOptions, MiB


def test_a_budget_spent_before_the_search_leaves_only_the_first_load(sharded_model: Path) -> None:
    """A command that started twice ``budget_s`` ago has no budget left, nor the evidence's
    overrun past it (``EVIDENCE_OVERRUN``, which a fast run would fit in): the search makes
    the one load without which there is no answer, and nothing more."""
    model = open_model(sharded_model)
    known = measure_ceilings(model, ("sequential_read", "parallel_read", "memcpy"), repeats=1)
    first = Candidate.of("sequential", LoadOptions(workers=2, threads=1, chunk=16 * MiB))
    second = Candidate.of("pread", LoadOptions(workers=2, threads=1))
    budget_s = 5.0
    started = time.monotonic() - 2 * budget_s
    rec = recommend(
        model,
        budget_s,
        workers=2,
        pool=[first, second],
        peers=False,
        ceilings=known,
        started=started,
    )
    assert len(first.results) == 1 and rec.winner is first
    assert second.ended == "not measured" and not second.results
    assert rec.budget.elapsed_s >= 2 * budget_s  # counted from the caller's start, not the call
