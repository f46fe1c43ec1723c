"""The sentences and snippets of a recommendation: what was measured, and what was not."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core.configuration import parse_engine
from modelmon.core.measuring.ab import judge
from modelmon.core.measuring.ceiling_records import Ceiling, Ceilings
from modelmon.core.measuring.judging import Duel, decide
from modelmon.core.measuring.recommend import BudgetUse, Recommendation
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.options import MiB
from modelmon.core.output.explain import explain
from modelmon.core.output.snippets import snippets
from modelmon.core.system.storage import storage_facts

from ..measuring.records import candidate

CEILINGS = Ceilings(
    "m",
    (
        Ceiling("sequential_read", 500.0, (500.0,), "one reader", True),
        Ceiling("parallel_read", 1400.0, (1400.0,), "four readers", True),
    ),
)


@pytest.fixture
def model(sharded_model: Path) -> Model:
    return open_model(sharded_model)


def in_bucket(model: Model, endpoint: str = "http://127.0.0.1:9000") -> Model:
    """``model`` as if its files were objects served from ``endpoint``."""
    remote = SimpleNamespace(host_kind="minio-or-local", endpoint=endpoint)
    return dataclasses.replace(
        model, files=tuple(dataclasses.replace(f, remote=remote) for f in model.files)
    )


def record(model: Model, **fields: object) -> Recommendation:
    base = Recommendation(
        model=model,
        winner=fields.pop("winner"),  # type: ignore[arg-type]
        ranked=(),
        ceilings=CEILINGS,
        usable_ram=10**10,
        budget=BudgetUse(given_s=60, elapsed_s=59),
    )
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def test_tie_says_within_noise_and_why_the_simpler_one(model: Model) -> None:
    fast = candidate("sequential", 1305, 1290, 1320, 1300, workers=4, chunk=16 * MiB)
    single = candidate("sequential", 1300, 1280, 1310, 1295, chunk=16 * MiB)
    best, other, verdict, tie = decide(fast, single, [1.01, 0.98, 0.99])
    assert best is single
    rec = record(
        model,
        winner=best,
        ranked=(best, other),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=3),
    )
    text = " ".join(explain(rec))
    assert "under 5% apart" in text and "3 pairs" in text  # 1.01x by the median pair
    assert (
        f"simpler one is recommended: {single.spec}, because it uses fewer concurrent readers"
        in text
    )
    assert "(1 against 4)" in text


def test_entry_runs_within_noise_say_so_and_why_the_simpler_one(model: Model) -> None:
    """No pair fitted: a bucket search that took the one with fewer readers says why."""
    fast = candidate("sequential", 981, workers=4, chunk=16 * MiB)
    few = candidate("sequential", 806, chunk=16 * MiB)
    rec = record(model, winner=few, ranked=(fast, few), duel=Duel(other=fast, tie=True))
    text = " ".join(explain(rec))
    assert (
        "their runs were weighed, not in pairs: the pick's 806 MB/s (1 cold run) against "
        "981 MB/s (1 cold run); they are within twice their noise, so the simpler one is "
        f"recommended: {few.spec}, because it uses fewer concurrent"
    ) in text, text
    undecided = record(model, winner=fast, ranked=(fast, few), duel=Duel(other=few))
    text = " ".join(explain(undecided))
    assert "against 806 MB/s (1 cold run). Give it a longer budget for a verdict." in text
    # With the noise they were weighed against: their ratio, and the ratio that noise allows
    # (a new user's walk read "within twice their noise (the ±30% their runs spread)" of
    # runs 1.62x apart as ±60% overshot: twice is held in log space, 1.30² = 1.69×).
    import math

    from modelmon.core.measuring.noise import THEIRS, Noise

    noise = Noise(math.log(1.30), THEIRS)
    rec = record(
        model, winner=few, ranked=(fast, few), duel=Duel(other=fast, tie=True, noise=noise)
    )
    text = " ".join(explain(rec))
    assert (
        "against 981 MB/s (1 cold run), 1.22× apart, within twice the ±30% their runs spread "
        f"(up to 1.69×), so the simpler one is recommended: {few.spec}"
    ) in text, text
    small = Noise(math.log(1.05), THEIRS)
    apart = record(model, winner=fast, ranked=(fast, few), duel=Duel(other=few, noise=small))
    text = " ".join(explain(apart))
    assert (
        "against 806 MB/s (1 cold run), 1.22× apart, beyond twice the ±5% their runs spread "
        "(over 1.10×). Give it a longer budget for a verdict."
    ) in text, text


def test_tie_with_the_library_says_why_planned_reads_win(model: Model) -> None:
    fast = candidate("sequential", 160, 159, 161, workers=4, chunk=16 * MiB)
    library = candidate("library", 150, 143, 162, role="baseline")
    best, other, verdict, tie = decide(fast, library, [0.97, 1.01, 0.99])
    assert tie and best is fast and other is library
    rec = record(
        model,
        winner=best,
        ranked=(best, other),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=3),
    )
    text = " ".join(explain(rec))
    assert f"simpler one is recommended: {fast.spec}, because it reads with planned reads" in text
    assert "twice the model's bytes at peak" in text


def test_one_pair_far_apart_says_all_their_runs_decided(model: Model) -> None:
    """A new user's walk read "1 pair: too few to estimate the noise, so every run decided:
    ... more than 2× the ±12% their runs spread": a noise said not to be estimated, then
    given. It is the pairs' noise that one pair cannot estimate: all their runs are weighed
    against the noise of their runs, said as every such comparison says it."""
    fast = candidate("sequential", 605, 576, 707, workers=4, chunk=16 * MiB)
    slow = candidate("pread", 162, 158)
    best, other, verdict, tie = decide(fast, slow, [0.27])
    rec = record(
        model,
        winner=best,
        ranked=(best, other),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=1),
    )
    text = " ".join(explain(rec))
    assert "1 pair: too few to estimate the pairs' noise, so all their runs decided" in text
    assert "too few to estimate the noise" not in text
    # Both rates are said, the pick's beside its runs as the other finalist's is.
    assert "the pick's 605 MB/s (" in text and "the other finalist's 160 MB/s (" in text
    assert (
        "576–707" in text
        and "158–162" in text
        and "3.78× apart, beyond twice the ±1% their runs spread (over 1.03×)." in text
    )


def test_a_library_cut_early_is_still_the_baseline(model: Model) -> None:
    winner = candidate("sequential", 600, 580, 620, workers=4, chunk=16 * MiB)
    library = candidate("library", role="baseline")
    library.stopped_below_mbps, library.ended = 160.0, "cut early"
    library.reason = "cut early: 800 MB loaded after 4.50 s, when the leader had loaded all"
    text = " ".join(explain(record(model, winner=winner, ranked=(winner, library))))
    assert "stayed under 160 MB/s before it was cut: the recommendation is 3.75× that" in text


def test_a_pick_raced_against_nothing_says_it_of_modelmons_configurations(model: Model) -> None:
    """Not "nothing to compare it with": a loader's rounds and the baseline still compare."""
    winner = candidate("sequential", 600, 580, 620, workers=4, chunk=16 * MiB)
    text = " ".join(explain(record(model, winner=winner, ranked=(winner,))))
    assert (
        "It is the only one of modelmon's configurations that completed within the budget: "
        "none of the others was raced against it." in text
    )
    assert "nothing to compare" not in text


def test_a_zero_copy_pick_says_what_views_of_the_page_cache_mean(model: Model) -> None:
    winner = candidate("mmap-view", 1900, 1800, 2000, workers=4)
    text = " ".join(explain(record(model, winner=winner, ranked=(winner,))))
    assert "views of the file's pages in the page cache" in text and "SIGBUS" in text


def test_tie_between_equally_simple_ones_says_the_higher_median_decided(model: Model) -> None:
    big = candidate("sequential", 1282, 1280, 1290, readahead=16384)
    medium = candidate("sequential", 1285, 1270, 1300, readahead=4096)
    rec = record(
        model,
        winner=big,
        ranked=(big, medium),
        duel=Duel(other=medium, verdict=judge([1.0, 0.95, 1.04, 0.99]), tie=True, pairs=4),
    )
    text = " ".join(explain(rec))
    assert f"neither is simpler, so the higher median decided: {big.spec}." in text
    assert "simpler one is recommended" not in text


def test_shared_descriptor_on_fuse_is_named_the_failure_mode(model: Model, tmp_path: Path) -> None:
    winner = candidate("sequential", 330, 320, 340, workers=4, chunk=16 * MiB)
    shared = candidate("mmap-shared-fd", 12, workers=4, role="failure mode")
    shared.ended, shared.reason = "ruled out", "ruled out by storage: ..."
    rec = record(model, winner=winner, ranked=(winner, shared))
    facts = dataclasses.replace(storage_facts(tmp_path), is_fuse=True)
    line = next(x for x in explain(rec, facts) if x.startswith("mmap with one shared"))
    assert "12 MB/s here, 27.50× slower: this is the FUSE failure mode" in line
    assert "(4 readers)" in line  # no read log said more


def test_a_shared_descriptor_within_the_noise_is_not_called_the_failure_here(
    model: Model,
) -> None:
    """Walk 27 read "1.22× slower: this is the failure mode" of one run: a gap within twice
    the noise is said as such, and the failure mode as where it bites, not as seen here."""
    winner = candidate("sequential", 330, 320, 340, workers=4, chunk=16 * MiB)
    shared = candidate("mmap-shared-fd", 300, workers=4, role="failure mode")
    rec = record(model, winner=winner, ranked=(winner, shared))
    line = next(x for x in explain(rec) if x.startswith("mmap with one shared"))
    assert line == (
        "mmap with one shared descriptor (4 readers): 300 MB/s here, 1.10× slower, within "
        "twice a file read's usual ±11% run-to-run noise (up to 1.22×): not clearly slower on "
        "this storage, but it is the failure mode of FUSE and network mounts. Give every "
        "reader its own descriptor."
    )
    faster = candidate("mmap-shared-fd", 400, workers=4, role="failure mode")
    rec = record(model, winner=winner, ranked=(winner, faster))
    line = next(x for x in explain(rec) if x.startswith("Workers mapping one shared"))
    assert "were not slower here (400 MB/s, 1 " in line and " run)" in line, line


def test_a_failure_mode_stopped_before_any_byte_says_so_not_a_rate(
    model: Model, tmp_path: Path
) -> None:
    # The FUSE bench once printed "under 0 MB/s here, at least ∞× slower".
    winner = candidate("sequential", 480, 470, 490, workers=4, chunk=16 * MiB)
    shared = candidate("mmap-shared-fd", workers=4, role="failure mode")
    shared.stopped_below_mbps, shared.wall_seconds = 0.0, [7.4]
    shared.ended, shared.reason = "ruled out", "ruled out by storage: ..."
    rec = record(model, winner=winner, ranked=(winner, shared))
    facts = dataclasses.replace(storage_facts(tmp_path), is_fuse=True)
    line = next(x for x in explain(rec, facts) if x.startswith("mmap with one shared"))
    assert "loaded nothing before it was stopped, where the best ran at 480 MB/s" in line
    assert "FUSE failure mode" in line and "∞" not in line and "0 MB/s here" not in line


def test_the_failure_mode_names_the_sharing_its_read_log_measured(model: Model) -> None:
    winner = candidate("sequential", 330, 320, 340, workers=4, chunk=16 * MiB)
    shared = candidate("mmap-shared-fd", 12, workers=2, threads=2, role="failure mode")
    sharing = "4 readers share 1 descriptor"
    shared.results = [dataclasses.replace(r, descriptor_sharing=sharing) for r in shared.results]
    rec = record(model, winner=winner, ranked=(winner, shared))
    line = next(x for x in explain(rec) if x.startswith("mmap with one shared"))
    assert line.startswith("mmap with one shared descriptor (4 readers share 1 descriptor): ")


def test_a_peer_that_wins_is_named_with_its_settings(
    model: Model, transformers_model: Path
) -> None:
    own = candidate("sequential", 900, 880, 910, workers=4, chunk=16 * MiB)
    runai = candidate("x", 1800, 1750, 1820, role="peer")
    runai.config = parse_engine("runai RUNAI_STREAMER_CONCURRENCY=16")
    best, _, verdict, tie = decide(own, runai, [2.0, 1.98, 2.02])
    assert best is runai and not tie
    rec = record(
        model,
        winner=own,
        ranked=(own,),
        pick=runai,
        peers=(runai,),
        duel=Duel(other=own, verdict=verdict),
    )
    text = " ".join(explain(rec))
    assert "Use Run:ai Model Streamer" in text and "RUNAI_STREAMER_CONCURRENCY=16" in text
    assert "the config file holds" in text
    served = open_model(transformers_model)  # a folder vLLM serves: its lines are there
    by_tool = {s.tool: s for s in snippets(served, own, (own,), peers=(runai,))}
    runai_line = by_tool["vllm-runai_streamer"]
    assert runai_line.measured_as == "engine: runai RUNAI_STREAMER_CONCURRENCY=16"
    assert '{"concurrency": 16}' in runai_line.text
    assert "or RUNAI_STREAMER_CONCURRENCY=16" in runai_line.evidence()


def test_snippets_are_marked_measured_or_not(
    transformers_model: Path, diffusers_model: Path
) -> None:
    one = candidate("sequential", 700, 690, 710, chunk=16 * MiB)
    library = candidate("library", 400, 390, 410)
    served = open_model(transformers_model)
    by_tool = {s.tool: s for s in snippets(served, one, (one, library))}
    assert by_tool["modelmon"].text.startswith(
        "import modelmon.core; tensors = modelmon.core.load("
    )
    assert "diffusers" not in by_tool  # a Llama's folder: no pipeline line
    assert by_tool["vllm-lazy"].measured_as == library.spec
    assert by_tool["vllm-runai_streamer"].measured_as is None
    why = "listed as vLLM serves this folder (a transformers model: config.json)"
    assert (
        by_tool["vllm-prefetch"]
        .line()
        .endswith(
            "# not measured here: reads the files into the page cache ahead, then maps them; " + why
        )
    )
    assert (
        by_tool["vllm-eager"]
        .line()
        .endswith(
            f"# measured here as {one.spec}: 700 MB/s; reads each file whole into memory; {why}; "
            "the fastest of vllm's lines measured here"
        )
    )
    pipeline = {s.tool: s for s in snippets(open_model(diffusers_model), one, (one, library))}
    assert pipeline["diffusers"].measured_as == one.spec
    assert pipeline["diffusers"].mbps == pytest.approx(700)
    assert not [tool for tool in pipeline if tool.startswith("vllm")]  # no server of it


def test_gguf_snippets_cover_llama_cpp(gguf_models: dict[str, Path]) -> None:
    model = open_model(gguf_models["F16"])
    direct = candidate("direct", 900, 880, 910, workers=4, chunk=16 * MiB)
    mmap = candidate("mmap", 500, 490, 505)
    by_tool = {s.tool: s for s in snippets(model, direct, (direct, mmap))}
    assert by_tool["llama.cpp-direct-io"].mbps == pytest.approx(900)
    assert by_tool["llama.cpp"].measured_as == mmap.spec
    assert by_tool["llama.cpp-mlock"].measured_as is None
    assert by_tool["llama.cpp-no-mmap"].measured_as is None


def test_runs_that_shared_the_device_are_counted_with_who(model: Model) -> None:
    best = candidate("sequential", 900, 910, 905, workers=4)
    shared = dataclasses.replace(
        best.results[1], overlapped=("pid 812 (modelmon recommend m.gguf)",)
    )
    best.results[1] = shared
    text = " ".join(explain(record(model, winner=best, ranked=(best,))))
    assert "1 of the 3 runs measured here shared the device with other modelmon runs" in text
    assert "pid 812 (modelmon recommend m.gguf)" in text
    alone = candidate("sequential", 900, 910, 905, workers=4)
    assert "shared the device" not in " ".join(
        explain(record(model, winner=alone, ranked=(alone,)))
    )


def test_one_comparison_is_one_figure_in_the_sentences_and_the_ranking(model: Model) -> None:
    """The pick and the runner-up, paired in the finals: the explanation, "vs the pick" and
    the failure-mode sentence all give the pairs' median (1 / 0.47 here), never the ratio of
    the two medians (1300 / 620) beside it."""
    from modelmon.core.output import pick_speedup, times_text

    fast = candidate("sequential", 1300, 1290, 1310, workers=4)
    shared = candidate("mmap-shared-fd", 620, 600, 640, workers=4)
    best, other, verdict, tie = decide(fast, shared, [0.47, 0.46, 0.48])
    assert best is fast and not tie
    other.verdict = verdict  # as the finals leave it
    rec = record(
        model,
        winner=best,
        ranked=(best, other),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=3),
    )
    text = " ".join(explain(rec))
    said = times_text(pick_speedup(best, other) or 0)
    assert said == "2.13×" and f"{said} faster by the median pair, every pair agreeing" in text
    assert f"{said} slower: this is" in text  # the failure-mode sentence: the same figure
    assert times_text(1300 / 620) not in text
    # The same with the library as the runner-up: its sentence gives the finals' figure.
    library = candidate("library", 620, 600, 640, role="baseline")
    best, other, verdict, tie = decide(fast, library, [0.47, 0.46, 0.48])
    other.verdict = verdict
    rec = record(
        model,
        winner=best,
        ranked=(best, other),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=3),
    )
    text = " ".join(explain(rec))
    assert f"the recommendation is {said} that" in text and times_text(1300 / 620) not in text


def test_a_tie_on_one_pair_gives_the_gain_of_their_medians_as_such(model: Model) -> None:
    """A 10 s budget left one pair of the pick and the runner-up (one pair: all their runs
    decide): the sentence gives the ratio of their medians (692 / 550 MB/s) and says so,
    not "by the median pair" of a figure no pair gave."""
    simple = candidate("sequential", 500, 692, 900, chunk=16 * MiB)
    wide = candidate("sequential", 350, 750, workers=4, threads=2, chunk=64 * MiB)
    best, other, verdict, tie = decide(simple, wide, [0.7])
    assert best is simple and tie
    other.verdict = verdict
    rec = record(
        model,
        winner=best,
        ranked=(best, other),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=1),
    )
    text = " ".join(explain(rec))
    assert "the pick 1.26× faster by their medians, but one pair" in text, text
    assert "by the median pair" not in text


def test_a_figure_of_one_run_is_that_runs_no_median_no_range(model: Model) -> None:
    """One run's figure is its own: "1 cold run", never "median of 1 cold run, 632–632";
    from two runs up, their median and range."""
    from modelmon.core.output.answer import answer

    one = candidate("sequential", 632, workers=4)
    library = candidate("library", 300, role="baseline")
    rec = record(model, winner=one, ranked=(one, library))
    said = [*explain(rec), *answer(rec, "m.toml").lines()]
    assert any("at 632 MB/s (1 cold run)" in line for line in said), said
    assert not any("median of 1 " in line or "632–632" in line for line in said), said
    two = candidate("sequential", 620, 644, workers=4)
    said = explain(record(model, winner=two, ranked=(two, library)))
    assert any("(median of 2 cold runs, 620–644 MB/s)" in line for line in said), said


def test_a_file_bound_found_with_more_readers_names_both_settings(model: Model) -> None:
    """A new user's walk read "parallel ones with their own descriptors reach 1560 MB/s; the
    best plain reader, 1995 MB/s, is the storage bound" as a contradiction: the bound came
    from 8 readers, the parallel ceiling from 4. The sentence names both settings."""
    sweep = (
        ("1 reader(s), 16 MiB requests, buffered", 480.0),
        ("4 reader(s), 16 MiB requests, buffered", 1540.0),
        ("8 reader(s), 16 MiB requests, buffered", 2010.0),
    )
    ceilings = Ceilings(
        "m",
        (
            Ceiling("sequential_read", 500.0, (500.0,), "plain reader, 1 thread(s)", True),
            Ceiling(
                "parallel_read",
                1560.0,
                (1560.0,),
                "plain reader, 4 thread(s), own descriptors, 16 MiB reads, cold, discard",
                True,
            ),
            Ceiling(
                "storage", 1995.0, (1995.0,), "plain reader, best of a sweep", True, curve=sweep
            ),
        ),
    )
    pick = candidate("sequential", 1500, 1510, 1490, workers=4, chunk=16 * MiB)
    text = explain(record(model, winner=pick, ranked=(pick,), ceilings=ceilings))[0]
    assert text == (
        "Measured on this file by plain readers, cold: one streams 500 MB/s; 4 with their own "
        "descriptors reach 1560 MB/s; the best of a sweep of plain readers, 8 readers, 16 MiB "
        "requests, buffered, reads at 1995 MB/s: the storage bound."
    )


def test_a_tie_on_one_pair_says_all_their_runs_decided_as_the_ranking_does(model) -> None:
    """Walk 15: a bucket's why said "1 pair: within noise ...: the pairs do not separate
    them" where its ranking said "one pair: too few to estimate the noise, so all their runs
    decided". One pair decides nothing alone; both now say so."""
    from modelmon.core.measuring.noise import BUCKET_NOISE, unpaired_noise

    simple = candidate("sequential", 500, 692, 900, chunk=16 * MiB)
    wide = candidate("sequential", 350, 750, workers=4, threads=2, chunk=64 * MiB)
    noise = unpaired_noise(simple, wide, [simple, wide], BUCKET_NOISE)  # as the search does
    best, other, verdict, tie = decide(simple, wide, [0.7], noise)
    assert best is simple and tie
    rec = record(
        model,
        winner=best,
        ranked=(best, other),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=1, noise=noise),
    )
    text = " ".join(explain(rec))
    assert (
        "1 pair: too few to estimate the pairs' noise, so all their runs decided: the pick "
        "1.26× faster by their medians, within twice the ±36% their runs spread (up to 1.86×), "
        "so the simpler one is recommended"
    ) in text, text
    assert "the pairs do not separate them" not in text


def test_pairs_that_decide_say_how_far_they_spread(model: Model) -> None:
    """Walk 16: the CLI's why said "2 pairs: 2.25× faster, every pair agreeing beyond the
    noise" and named no noise, where every other comparison names its own. Walk 20: "1.06×
    faster" beside medians 1.17× apart, and not said to be of pairs: it is "by the median
    pair"."""
    fast = candidate("sequential", 2228, 2200, 2250, workers=4, chunk=16 * MiB)
    library = candidate("library", 1017, 990, role="baseline")
    best, other, verdict, tie = decide(fast, library, [0.45, 0.44])
    assert best is fast and not tie
    rec = record(
        model,
        winner=best,
        ranked=(best, other),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=2),
    )
    text = " ".join(explain(rec))
    assert (
        "2 pairs: 2.22× faster by the median pair, every pair agreeing, beyond twice their "
        "noise (over 1.02×; both pairs within ±2 % of their median)."
    ) in text, text


def test_the_librarys_sentence_says_its_ratio_is_of_pairs(model: Model) -> None:
    """Walk 21: "The library's own read (safetensors get_tensor) reached 885 MB/s: the
    recommendation is 2.40x that" beside a pick of 2047 MB/s (2.31x): 2.40x was the median
    of their pairs, which the sentence now says."""
    fast = candidate("sequential", 2047, 1990, 2100, workers=4, chunk=16 * MiB)
    library = candidate("library", 885, 870, 900, role="baseline")
    best, other, verdict, tie = decide(fast, library, [1 / 2.40, 1 / 2.45, 1 / 2.35])
    assert best is fast and not tie
    other.verdict = verdict  # as the finals leave it
    rec = record(
        model,
        winner=best,
        ranked=(best, other),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=3),
    )
    text = " ".join(explain(rec))
    assert "reached 885 MB/s: the recommendation is 2.40× that by the median of their " in text


def test_the_librarys_sentence_says_the_answers_judgement(model: Model) -> None:
    """Walk 22: the answer said "1.45x the library's own read ... 934 MB/s against 646 MB/s,
    medians of 3 cold runs each, beyond twice the ±14% their runs spread" while the why said
    the library "reached 646 MB/s: within the winner's spread: little to gain over it" (the
    pick's slowest run, 534 MB/s, was under the library's median: a rule of its own). The
    why's sentence is the answer's judgement, with its gain and the noise it was weighed
    against."""
    from modelmon.core.output.answer import answer

    fast = candidate("sequential", 934, 534, 1547, workers=4, chunk=16 * MiB)
    other = candidate("sequential", 900, 880, 910, workers=8, chunk=16 * MiB)
    library = candidate("library", 646, 640, 650, role="baseline")
    best, runner_up, verdict, tie = decide(fast, other, [0.97, 0.96, 0.95])
    assert best is fast
    rec = record(
        model,
        winner=best,
        ranked=(best, runner_up, library),
        duel=Duel(other=runner_up, verdict=verdict, tie=tie, pairs=3),
    )
    gain = answer(rec, "m.toml").gain
    assert gain.startswith("1.45× the library's own read"), gain
    weighed = gain.split("each, ", 1)[1].removesuffix(".")
    assert weighed.startswith("beyond twice "), gain
    text = " ".join(explain(rec))
    assert "little to gain" not in text, text
    assert f"reached 646 MB/s: the recommendation is 1.45× that, {weighed}." in text, text


def test_a_run_above_the_bound_its_median_is_under_is_said(model: Model) -> None:
    """Walk 24: "Best: ... at 1742 MB/s (median of 2 cold runs, 1239–2246 MB/s), 99% of the
    storage bound" of 1753 MB/s, measured once: a run 28 % above its bound, and not a word."""
    storage = Ceiling("storage", 1753.0, (1753.0,), "best of a sweep", True)
    ceilings = Ceilings("m", (storage,))
    pick = candidate("sequential", 1239, 2246, workers=4, chunk=16 * MiB)
    rec = record(model, winner=pick, ranked=(pick,), ceilings=ceilings)
    text = " ".join(explain(rec))
    assert "99% of the storage bound" in text, text
    assert (
        "1 of its 2 runs read faster than the storage bound (2246 MB/s against 1753 MB/s, one read)"
    ) in text, text
    within = candidate("sequential", 1700, 1742, workers=4, chunk=16 * MiB)
    rec = record(model, winner=within, ranked=(within,), ceilings=ceilings)
    assert "read faster than the" not in " ".join(explain(rec))
