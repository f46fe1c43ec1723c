"""The start page's rows: what each shows, filtering and sorting, on a fake home."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from modelmon.core import discover_models
from modelmon.gui.state.model_list import model_row, summary_text, visible_rows


def rows(model_home: SimpleNamespace):
    return [model_row(model) for model in discover_models().models]


def test_each_row_names_reference_format_files_size_and_where(model_home: SimpleNamespace):
    found = {row.reference: row for row in rows(model_home)}
    sharded = found["hf:acme/tiny-llama"]
    assert (sharded.name, sharded.format, sharded.files) == ("acme/tiny-llama", "safetensors", 2)
    cells = sharded.cells()
    assert cells[0] == "acme/tiny-llama" and cells[-1] == "hf:acme/tiny-llama"
    assert cells[3].endswith("kB") or cells[3].endswith("MB")
    assert sharded.where.startswith("Hugging Face cache · ")
    assert "(local)" in sharded.where  # tmp_path is on a local filesystem here
    pulled = found["ollama:tinyllama:latest"]
    assert pulled.where.startswith("Ollama · ") and pulled.format == "gguf"
    assert "tinyllama" in pulled.tip


def test_filter_needs_every_word_in_any_column(model_home: SimpleNamespace):
    all_rows = rows(model_home)
    assert len(visible_rows(all_rows)) == len(all_rows) == 5
    gguf = visible_rows(all_rows, "GGUF")
    assert {row.format for row in gguf} == {"gguf"} and len(gguf) == 4
    assert [row.reference for row in visible_rows(all_rows, "ollama gguf")] == [
        "ollama:tinyllama:latest"
    ]
    assert [row.reference for row in visible_rows(all_rows, "q8_0 hugging")] == [
        "hf:acme/tiny-llama-GGUF/tiny-Q8_0.gguf"
    ]
    assert visible_rows(all_rows, "no-such-model") == []


def test_sort_by_name_or_by_size(model_home: SimpleNamespace):
    all_rows = rows(model_home)
    by_name = visible_rows(all_rows, sort="name")
    assert [row.name.lower() for row in by_name] == sorted(row.name.lower() for row in all_rows)
    largest_first = visible_rows(all_rows, sort="size", descending=True)
    sizes = [row.bytes for row in largest_first]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]
    with pytest.raises(ValueError):
        visible_rows(all_rows, sort="colour")


def test_summary_says_how_many_and_when_the_search_stopped_early():
    assert summary_text(0, 0, 3, False) == (
        "No models found in the 3 places searched. Open a file or folder, or name the folders "
        "your models are in with MODELMON_MODEL_DIRS (separated by ':') and search again."
    )
    assert summary_text(0, 0, 1, False).startswith("No models found in the 1 place searched.")
    nowhere = summary_text(0, 0, 0, False)  # not "in 0 known places"
    assert nowhere.startswith("No models found: none of the places they are kept (the Hugging")
    assert summary_text(5, 5, 3, False) == "5 models found"
    assert summary_text(1, 1, 3, False) == "1 model found"
    assert summary_text(2, 5, 3, True).startswith("2 of 5 models match (search stopped early")
