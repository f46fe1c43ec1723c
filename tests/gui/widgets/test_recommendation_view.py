"""The Recommendation tab draws what its state says: under the Apply table, why a loader
people use has no line there (the config's [apply_left_out])."""

from __future__ import annotations

from pathlib import Path

from modelmon.core import Ceiling, Ceilings, Recommendation, open_model, write_safetensors_model
from modelmon.core.measuring import BudgetUse
from modelmon.gui.state.recommending import RecommendationShown
from modelmon.gui.widgets.recommendation_view import RecommendationView

from ...core.measuring.records import candidate

CEILINGS = Ceilings("m", (Ceiling("parallel_read", 1400.0, (1400.0,), "four readers", True),))


def _shown(model: Path) -> RecommendationShown:
    best = candidate("sequential", 1000.0, 1010.0, 990.0, workers=4)
    rec = Recommendation(
        model=open_model(model),
        winner=best,
        ranked=(best,),
        ceilings=CEILINGS,
        usable_ram=10**10,
        budget=BudgetUse(given_s=60.0, elapsed_s=58.0),
    )
    return RecommendationShown("done", recommendation=rec, explanation=("Best: sequential.",))


def test_the_apply_table_says_why_no_server_line_is_there(qtbot, tmp_path: Path) -> None:
    view = RecommendationView()
    qtbot.addWidget(view)
    view.show()
    alone = write_safetensors_model(tmp_path / "weights", layers=1, hidden=64, vocab=256)
    view.draw(_shown(alone))
    tools = [view.snippets.item(r, 0).text() for r in range(view.snippets.rowCount())]
    assert not any(tool.startswith(("vllm", "sglang", "runai")) for tool in tools)
    assert view.left_out.isVisible()
    assert view.left_out.text().startswith("No vLLM or SGLang line: ")
    assert f"{alone.parent} has no config.json that names one." in view.left_out.text()
    served = write_safetensors_model(
        tmp_path / "llama", layers=1, hidden=64, vocab=256, transformers_config=True
    )
    view.draw(_shown(served))  # vLLM's lines are there: nothing to say
    tools = [view.snippets.item(r, 0).text() for r in range(view.snippets.rowCount())]
    assert "vllm-lazy" in tools
    assert view.left_out.text() == "" and not view.left_out.isVisible()


def test_copy_puts_the_line_on_the_clipboard_and_says_so(qtbot, tmp_path: Path) -> None:
    """A new user clicked Copy and saw nothing happen: the button says it copied, then goes
    back to Copy."""
    from PySide6.QtWidgets import QApplication

    from modelmon.gui.widgets.recommendation_view import COPIED

    view = RecommendationView()
    qtbot.addWidget(view)
    view.show()
    view.draw(_shown(write_safetensors_model(tmp_path / "m", layers=1, hidden=64, vocab=256)))
    assert view.paste.text() and view.copy.isVisible()
    view.copy.click()
    assert QApplication.clipboard().text() == view.paste.text()
    assert view.copy.text() == COPIED
    qtbot.waitUntil(lambda: view.copy.text() == "Copy", timeout=10_000)
