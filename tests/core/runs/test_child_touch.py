"""The child harness's touch: the bytes it reports are those of the tensors a load made, each
byte once, whether the tensors own their memory, share one buffer side by side, or are tied."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelmon.core import open_model, run_program, write_safetensors_model
from modelmon.core.configuration import parse_program
from modelmon.core.loaders.child_touch import touch_tensors, union_bytes

from .conftest import needs


def test_views_side_by_side_in_one_buffer_count_each_its_own_part() -> None:
    torch = pytest.importorskip("torch")
    buffer = torch.zeros(3 << 20, dtype=torch.uint8)  # one read of the file, as fastsafetensors
    views = [buffer[: 1 << 20], buffer[1 << 20 : 3 << 20].view(torch.float16)]
    assert touch_tensors(iter(views)) == (3 << 20, 2)


def test_tied_weights_count_once_and_owned_tensors_each() -> None:
    torch = pytest.importorskip("torch")
    embed = torch.ones(1024, 256)
    tied = [embed, torch.zeros(64, 64), embed, embed.view(-1)]
    assert touch_tensors(iter(tied)) == (1024 * 256 * 4 + 64 * 64 * 4, 4)


def test_overlapping_spans_are_counted_once() -> None:
    assert union_bytes({(0, 10), (5, 20), (30, 40), (30, 35)}) == 30
    assert union_bytes(set()) == 0


def test_fastsafetensors_loads_the_whole_model_cold(tmp_path: Path) -> None:
    # Its CPU path reads the file with O_DIRECT into one buffer and hands out tensors that
    # are views of it: the watch sees no arrivals, the child's touch counts the load.
    needs("fastsafetensors")
    path = write_safetensors_model(tmp_path, layers=2, hidden=512, vocab=2048, seed=5)
    model = open_model(str(path))
    outcome = run_program(model, parse_program("engine: fastsafetensors"), path=str(path))
    load = outcome.result
    assert load.status == "ok", load.error
    assert load.cache.cold, load.cache.note
    assert outcome.own is not None and outcome.own["bytes"] == model.total_bytes
    assert load.bytes == model.total_bytes
    # Watched, it is named, and read past the page cache it is no lazy load.
    assert outcome.watch is not None and outcome.watch.loader.key == "fastsafetensors"
    assert not any(f.code == "partial-read" for f in outcome.watch.findings)
