"""Recent-model labels, where save dialogs start, the A/B's cache state and sessions, the Help
texts."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from modelmon import __version__
from modelmon.core import ABResult
from modelmon.core.errors import OptionsError
from modelmon.core.options import LoadOptions
from modelmon.gui.state.ab_session import ABHistory, ab_cache
from modelmon.gui.state.help_text import about_html, how_it_measures, menu_text, shortcuts_html
from modelmon.gui.state.recent_entries import normalised, recent_label, still_there
from modelmon.gui.state.save_location import save_start

HOW = Path(__file__).resolve().parents[3] / "docs" / "how-it-measures.md"


def test_recent_labels_name_the_folder_that_tells_shards_apart():
    home = "/home/ada"
    index = "/home/ada/models/llama-3b/model.safetensors.index.json"
    assert recent_label(index, home) == "model.safetensors.index.json — ~/models/llama-3b"
    assert recent_label("/data/m/model.gguf", home) == "model.gguf — /data/m"
    assert recent_label("/data/m/", home) == "m — /data"
    assert recent_label("hf:acme/tiny", home) == "hf:acme/tiny"


def test_references_stay_as_they_are_and_paths_become_absolute(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalised("ollama:llama3:8b") == "ollama:llama3:8b"
    assert normalised("model.gguf") == str(tmp_path / "model.gguf")
    assert still_there("hf:acme/tiny") and not still_there(str(tmp_path / "gone.gguf"))


def test_save_dialogs_start_in_the_last_export_folder_else_home(tmp_path: Path):
    exports = tmp_path / "exports"
    exports.mkdir()
    assert save_start(str(exports), "a.json", "/home/ada") == str(exports / "a.json")
    assert save_start(None, "a.json", "/home/ada") == "/home/ada/a.json"
    gone = str(tmp_path / "removed")
    assert save_start(gone, "a.json", "/home/ada") == "/home/ada/a.json"


def test_an_ab_starts_from_the_cache_state_both_sides_name():
    assert ab_cache(LoadOptions(cache="warm"), LoadOptions(cache="warm", workers=2)) == "warm"
    with pytest.raises(OptionsError, match="A is 'cold', B is 'warm'"):
        ab_cache(LoadOptions(cache="cold"), LoadOptions(cache="warm"))


def test_ab_sessions_are_numbered_and_a_cancelled_one_keeps_the_earlier_verdict():
    first, kept = cast(ABResult, object()), cast(ABResult, object())
    history = ABHistory()
    assert history.start("10:00:00") == "A/B 1 at 10:00:00"
    history.finish(first)
    assert history.result is first and history.completed == [("A/B 1 at 10:00:00", first)]
    assert history.start("10:05:00") == "A/B 2 at 10:05:00"  # then cancelled: no verdict
    assert history.result is None and history.completed == [("A/B 1 at 10:00:00", first)]
    assert history.verdict == ("A/B 1 at 10:00:00", first)  # its winner is still exported
    # The model again, with the verdict and the count kept from its last visit.
    history.restore(kept, "A/B 1 at 10:00:00", 2)
    assert history.result is kept and history.completed == [("A/B 1 at 10:00:00", kept)]
    assert history.start("11:00:00") == "A/B 3 at 11:00:00"
    history.restore(None)
    assert history.result is None and history.session is None and not history.completed


def test_how_it_measures_is_the_docs_section_word_for_word():
    readme = HOW.read_text(encoding="utf-8")
    section = readme.split("## How it measures\n", 1)[1].split("\n## ", 1)[0]
    body = section.split("-->\n", 1)[1].split("<!-- /how-it-measures -->", 1)[0]
    assert body == how_it_measures()
    assert "verified cold" in body


def test_about_and_shortcuts_texts():
    about = about_html("PySide6 6.11", [("Source", "https://example.org/src")])
    assert __version__ in about and "href='https://example.org/src'" in about
    assert "README" in about_html("PySide6 6.11", [])
    table = shortcuts_html([("File", "Open model", "Ctrl+O"), ("Run", "A & B", "Ctrl+T")])
    assert "<b>Ctrl+O</b>" in table and "A &amp; B" in table


def test_menu_words_keep_a_literal_ampersand_and_drop_mnemonics():
    assert menu_text("CPU && memory") == "CPU & memory"
    assert menu_text("&Run A/B × n") == "Run A/B × n"
    assert menu_text("Disk && page &cache") == "Disk & page cache"
