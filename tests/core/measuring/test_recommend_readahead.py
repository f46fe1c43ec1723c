"""recommend tries device readahead for the leading strategy where it may set it, and a pick
that sets it says how to keep it (measured), on a loop device of the test's own."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from modelmon.core.loading.config_file import read_config
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceilings import measure_ceilings
from modelmon.core.measuring.recommend import NEEDED_CEILINGS, recommend
from modelmon.core.measuring.search_space import READAHEAD_KIB
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.core.output.comparison import robustness_reason
from modelmon.core.output.config import recommendation_document
from modelmon.core.output.config_text import write_config
from modelmon.core.output.explain import explain
from modelmon.core.system import readahead


def test_readahead_candidates_are_measured_and_a_pick_says_how_to_keep_it(
    loop_disk: Path, own_state: Path, tmp_path: Path
) -> None:
    model = open_model(write_safetensors_model(loop_disk, layers=4, hidden=128, vocab=512))
    knob = readahead.locate(model.files[0].path)
    assert knob is not None
    before = knob.read_kb()
    # Without peers the first readahead value enters after six of modelmon's candidates, runs
    # of a fraction of a second here (about 3.5 s into the search on an idle machine, the
    # ceilings included). The ceilings are measured first, outside the budget: 20 s then
    # reaches it with both cores busy elsewhere (10 s did not once, beside a whole suite),
    # and the rest buys runs of the finalists.
    ceilings = measure_ceilings(model, NEEDED_CEILINGS, repeats=1, workers=1)
    rec = recommend(model, budget_s=20, workers=1, peers=False, ceilings=ceilings)
    assert knob.read_kb() == before  # every run put it back
    tried = [c for c in (*rec.ranked, *rec.unranked) if c.options.readahead is not None]
    assert {c.options.readahead for c in tried} == set(READAHEAD_KIB) - {before}
    assert any(c.results for c in tried)  # at least one fitted the budget

    # Whatever won here, a pick that sets readahead is explained and applied like this:
    measured = next(c for c in tried if c.results)
    picked = dataclasses.replace(rec, winner=measured, pick=None)
    kb = measured.options.readahead
    sectors = kb * 1024 // 512
    text = " ".join(explain(picked))
    assert f"sudo blockdev --setra {sectors} /dev/{knob.device}" in text
    assert "512-byte sectors" in text and f'ATTR{{queue/read_ahead_kb}}="{kb}"' in text
    document = recommendation_document(picked, "modelmon.toml")
    snippet = document["apply"]["readahead-device"]
    assert snippet == f"sudo blockdev --setra {sectors} /dev/{knob.device}"
    assert document["apply_evidence"]["readahead-device"].startswith("or: ")
    path = write_config(tmp_path / "modelmon.toml", document)
    assert read_config(path).options.readahead == kb


def test_within_noise_the_device_as_it_is_is_simpler() -> None:
    plain = Candidate.of("sequential", LoadOptions(threads=1))
    raised = Candidate.of("sequential", LoadOptions(threads=1, readahead=4096))
    assert plain.robustness() < raised.robustness()
    assert "readahead" in robustness_reason(plain, raised)
