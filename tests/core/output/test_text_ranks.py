"""The ranks report's table: what each rank read itself and what it holds, in every mode."""

from __future__ import annotations

import re
from pathlib import Path

from modelmon.core.measuring.ranks import run_ranks
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.model.tensor_parallel import kept_bytes, tp_slice
from modelmon.core.options import LoadOptions
from modelmon.core.output.text import render_ranks
from modelmon.core.system.memory_limit import ram_text
from modelmon.core.units import human_bytes


def header(text: str) -> str:
    return next(line for line in text.splitlines() if line.split()[:2] == ["rank", "status"])


def cells(text: str) -> list[tuple[str, str]]:
    """Each ok rank's row's two byte cells, in order: ("0 B", "2 MiB")."""
    rows = [line.split() for line in text.splitlines() if re.match(r"\s*\d+  ok ", line)]
    return [(" ".join(row[2:4]), " ".join(row[4:6])) for row in rows]


def test_each_modes_table_says_what_a_rank_read_itself_and_what_it_holds(
    tmp_path: Path,
) -> None:
    """``load --ranks 2 --ranks-mode one-reader`` wrote "0 B" read and "0 MiB" kept on every
    rank's row beside "the model's 2.29 GB on every rank": read as nothing loaded. A
    one-reader rank reads nothing itself and maps the whole of the reader's one copy; a whole
    or slice rank reads into its own memory and keeps its tensor-parallel part."""
    path = write_safetensors_model(tmp_path, layers=2, hidden=128, vocab=512, shards=2, seed=3)
    model = open_model(path)
    size = human_bytes(model.total_bytes)
    options = LoadOptions(cache="cold")

    one = run_ranks(model, "sequential", options, ranks=2, mode="one-reader")
    assert one.status == "ok", one.error
    text = render_ranks(one)
    assert header(text).split()[2:6] == ["read", "by", "it", "maps"]
    assert cells(text) == [("0 B", ram_text(model.total_bytes))] * 2
    assert f"the reader read the model's {size} once, into one shared copy" in text
    assert f"the model's {size} on every rank at" in text
    assert [rank["mapped_bytes"] for rank in one.to_dict()["ranks"]] == [model.total_bytes] * 2

    parts = [kept_bytes(*tp_slice(model, rank, 2)) for rank in range(2)]
    whole = run_ranks(model, "sequential", options, ranks=2, mode="whole")
    assert whole.status == "ok", whole.error
    text = render_ranks(whole)
    assert header(text).split()[2:6] == ["read", "by", "it", "kept"]
    assert cells(text) == [(size, ram_text(part)) for part in parts]
    assert f"the model's {size} read by every rank at" in text  # each keeps its part only
    assert "on every rank" not in text
    assert [rank["mapped_bytes"] for rank in whole.to_dict()["ranks"]] == [0, 0]

    sliced = run_ranks(model, "sequential", options, ranks=2, mode="slice")
    assert sliced.status == "ok", sliced.error
    text = render_ranks(sliced)
    assert header(text).split()[2:6] == ["read", "by", "it", "kept"]
    read = [rank.result.bytes for rank in sliced.ranks if rank.result is not None]
    assert all(0 < bytes_read < model.total_bytes for bytes_read in read)
    assert cells(text) == [(human_bytes(b), ram_text(p)) for b, p in zip(read, parts, strict=True)]
    assert f"the model's {size} between the ranks at" in text
