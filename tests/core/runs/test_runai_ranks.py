"""Run:ai's streamer as N ranks of one job (``child_ranks``): the harness starts the other
ranks, they join one torch.distributed group over gloo, and every rank gets and touches the
whole model, whether they share the reads (RUNAI_STREAMER_DIST=1) or each reads it all."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelmon.core import open_model, run_program, write_safetensors_model
from modelmon.core.configuration import parse_program
from modelmon.core.errors import OptionsError

from .conftest import needs


@pytest.mark.parametrize("dist", ["1", "default"])
def test_two_ranks_each_load_the_whole_model_cold(tmp_path: Path, dist: str) -> None:
    needs("runai")
    path = write_safetensors_model(tmp_path, layers=2, hidden=512, vocab=2048, seed=7)
    model = open_model(str(path))
    spec = f"engine: runai ranks=2 RUNAI_STREAMER_DIST={dist}"
    outcome = run_program(model, parse_program(spec), path=str(path))
    load = outcome.result
    assert load.status == "ok", (load.error, outcome.stderr)
    assert load.cache.cold, load.cache.note
    own = outcome.own
    assert own is not None and own["bytes"] == model.total_bytes
    assert [(r["rank"], r["bytes"]) for r in own["ranks"]] == [(1, model.total_bytes)]
    assert own["tensors"] == len(model.extents)
    assert load.bytes == model.total_bytes


def test_ranks_take_a_whole_number_from_one() -> None:
    with pytest.raises(OptionsError, match="ranks must be one of 1, 2, or a whole number"):
        parse_program("engine: runai ranks=0")
