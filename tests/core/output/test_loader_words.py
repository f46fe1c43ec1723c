"""The user's loader in words: what to change, by how much, against what, each sentence exact
for the decision it reports."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from modelmon.core.measuring import judge
from modelmon.core.measuring.advice import LoaderAdvice
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.output.loader import loader_explanation

from ..measuring.records import advice, candidate, engine_run

AS_IS = engine_run("transformers", 100, 102, 98)
BEST = candidate("sequential", 400, 410, 405, workers=4, chunk=16 << 20)


def _advice(changes: tuple[Candidate, ...], pick: Candidate | None) -> LoaderAdvice:
    return advice(AS_IS, "transformers", changes, pick, BEST)


def test_a_change_faster_in_every_pair_is_said_as_the_loaders_own_line():
    change = replace(
        engine_run("transformers disable_mmap=true", 150, 153, 147),
        verdict=judge([1.5, 1.52, 1.49]),
    )
    lines = loader_explanation(_advice((change,), change))
    assert lines[0] == (
        "Change your loader: transformers from_pretrained with disable_mmap=true. "
        "Measured here: 150 MB/s against 100 MB/s as it is, 1.50× (by the median of 3 paired "
        "cold rounds, every pair agreeing)."
    )
    assert lines[1] == (
        "modelmon's best (sequential workers=4 threads=1 chunk=16MiB) loaded it at 405 MB/s in "
        "the same rounds: 4.05× your loader as it is by their medians (modelmon.core.load(path, "
        "config=...) applies it)."
    )


def test_modelmons_paired_gain_over_the_loader_says_it_is_of_the_rounds():
    """Walk 20: "modelmon's best ... loaded it at 997 MB/s in the same rounds: 1.37× your
    loader as it is" beside the loader's 731 MB/s (1.36× by their medians): 1.37× was the
    median of the rounds' ratios, which the sentence did not say."""
    paired = replace(
        candidate("sequential", 1048, 945, workers=4, chunk=16 << 20),
        verdict=judge([1048 / 809, 945 / 653]),
    )
    loader = engine_run("safetensors", 809, 653)
    lines = loader_explanation(replace(advice(loader, "safetensors", (), None, paired)))
    said = next(line for line in lines if line.startswith("modelmon's best"))
    assert "× your loader as it is by the median of their 2 paired rounds (" in said, said


def test_no_clear_change_keeps_the_loader_and_says_why():
    change = replace(
        engine_run("transformers disable_mmap=true", 101, 99, 103),
        verdict=judge([1.01, 0.97, 1.05]),
    )
    lines = loader_explanation(_advice((change,), None))
    assert lines[0].startswith(
        "No setting of your loader was measured clearly faster than it is (100 MB/s, median of "
        "3 cold runs, 98–102 MB/s): the best tried, engine: transformers disable_mmap=true, ran "
        "1.01× its "
        "baseline (median of 3 paired cold rounds, from 0.97× to 1.05×)"
    ), lines[0]


def test_a_loader_that_did_not_complete_is_said_first():
    failed = replace(AS_IS, results=[], reason="exited with code 1: no such file")
    lines = loader_explanation(replace(_advice((), None), loader=failed))
    assert lines == ["Your loader (engine: transformers) exited with code 1: no such file."]


def test_modelmons_best_faster_but_not_certain_says_why_the_loader_is_kept():
    """The answer keeps the loader ("nothing measured here is clearly faster"): a line saying
    modelmon's best was 1.50× must say why that is not the answer."""
    unsure = replace(
        candidate("sequential", 150, 100, 200, workers=4, chunk=16 << 20),
        verdict=judge([1.9, 0.95, 1.5]),
    )
    lines = loader_explanation(replace(_advice((), None), modelmon=unsure))
    (said,) = [line for line in lines if line.startswith("modelmon's best")]
    assert said.endswith(
        "yet not the answer: round by round it was 0.95–1.90× your loader, so the gain is not "
        "certain (a longer budget runs more rounds)."
    ), said


def test_a_change_that_completed_fewer_rounds_than_its_baseline_says_so():
    """The change ran one of the three rounds its baseline did (its other runs failed): it is
    not picked, and its sentence says why, not that it gained too little."""
    change = replace(engine_run("transformers disable_mmap=true", 250), verdict=judge([2.5]))
    lines = loader_explanation(_advice((change,), None))
    assert lines[0].endswith(
        "ran 2.50× its baseline (1 paired cold round): faster, but it completed 1 of the 3 "
        "rounds its baseline did."
    ), lines[0]
    assert "worth a change" not in lines[0]


def test_the_watchs_fix_is_not_said_beside_a_measured_answer():
    """A new user's walk: the Why named the watch's fix (a read never run here) beside the
    change the rounds measured. The measured answer is the fix; the watch's own advice is
    said, marked as not measured, only where nothing measured was clearly faster."""
    from modelmon.core.watching.result import Finding

    finding = Finding(
        "mmap-faults", "It read its tensors through page faults.", {}, "Read with read()."
    )
    change = replace(
        engine_run("transformers disable_mmap=true", 150, 153, 147),
        verdict=judge([1.5, 1.52, 1.49]),
    )
    watched = SimpleNamespace(findings=(finding,))
    lines = loader_explanation(replace(_advice((change,), change), watch=watched))
    assert "What the watch saw of your loader: It read its tensors through page faults." in lines
    kept = replace(_advice((), None), modelmon=replace(BEST, verdict=None), watch=watched)
    assert (
        "What the watch saw of your loader: It read its tensors through page faults. What it "
        "usually takes, not measured here: Read with read()."
    ) in loader_explanation(kept)
