"""``modelmon load``: one measured load, as JSON or text; usage errors; Ctrl+C."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from modelmon.cli.flags import ignored_options
from modelmon.core import apply_config, open_model, write_safetensors_model
from modelmon.core.errors import ConfigMismatchWarning, ReadaheadSkippedWarning
from modelmon.core.options import LoadOptions, MiB, parse_spec

from .conftest import load_workers


def test_load_json(modelmon, sharded_model: Path) -> None:
    done = modelmon(
        "load",
        str(sharded_model),
        "--strategy",
        "pread",
        "--workers",
        "2",
        "--threads",
        "2",
        "--chunk-mib",
        "1",
        "--verify",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["strategy"] == "pread" and data["status"] == "ok"
    assert data["options"]["workers"] == 2 and data["options"]["chunk"] == 1 << 20
    assert data["cache"]["requested"] == "cold" and data["cache"]["resident_before"] <= 0.01
    assert len(data["files"]) == 3 and data["bytes"] > 0 and data["mbps"] > 0
    assert len(data["checksum"]) == 32
    assert {w["id"] for w in data["workers"]} == {0, 1}
    assert all({"name", "bytes", "seconds"} <= set(b) for b in data["blocks"])


def test_load_human_output(modelmon, sharded_model: Path) -> None:
    done = modelmon("load", str(sharded_model), "--cache", "warm", "--discard")
    assert done.returncode == 0, done.stderr
    assert "verified warm" in done.stdout and "MB/s" in done.stdout


def test_the_ignored_options_note_writes_each_option_as_the_strategy_line(
    modelmon, sharded_model: Path
) -> None:
    """One formatting of each option everywhere: ``chunk=16MiB`` in the note as in the
    strategy line (the note once said ``chunk=16777216``), ``verify=true`` as parse_spec
    reads it."""
    done = modelmon("load", str(sharded_model), "-s", "library", "--chunk-mib", "16")
    assert done.returncode == 0, done.stderr
    assert "library does not use chunk=16MiB: ignored" in done.stderr, done.stderr
    strategy = next(line for line in done.stdout.splitlines() if line.startswith("strategy"))
    assert "chunk=16MiB" in strategy
    options = LoadOptions(chunk=16 * MiB, madvise="random", verify=True)
    ignored = ignored_options("library", options)
    assert ignored == ["chunk=16MiB", "madvise=random"]
    for text in ignored:  # each as parse_spec reads it back
        name = text.partition("=")[0]
        assert getattr(parse_spec(f"library {text}")[1], name) == getattr(options, name)


def test_bad_option_is_a_usage_error(modelmon, sharded_model: Path) -> None:
    done = modelmon("load", str(sharded_model), "--workers", "0")
    assert done.returncode == 2 and "workers" in done.stderr and "Traceback" not in done.stderr
    done = modelmon("load", str(sharded_model), "--strategy", "teleport")
    assert done.returncode == 2 and "unknown strategy 'teleport'" in done.stderr


def test_ctrl_c_cancels_and_leaves_no_worker(modelmon_argv: list[str], tmp_path: Path) -> None:
    """Ctrl+C ends the load, not its end: the workers are frozen (SIGSTOP) before it, so the
    load can never end by itself, and a command that waited for it never exits (the 30 s
    of ``communicate`` fail it)."""
    path = write_safetensors_model(tmp_path, layers=4, hidden=1024, vocab=4096, dtype="F16")
    # Cold 4 KiB random reads: seconds of work, so Ctrl+C lands mid-load.
    process = subprocess.Popen(
        [
            *modelmon_argv,
            "load",
            str(path),
            "-s",
            "pread",
            "-w",
            "2",
            "-t",
            "1",  # one reader per worker: the load lasts seconds (the default is four)
            "--chunk-mib",
            "0.00390625",
            "--fadvise",
            "random",
            "--discard",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    parent = psutil.Process(process.pid)

    def workers() -> list[psutil.Process]:
        return load_workers(parent)

    deadline = time.monotonic() + 30
    while len(workers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    spawned = workers()
    assert len(spawned) == 2

    def bytes_read() -> int:
        total = 0
        for worker in spawned:
            with contextlib.suppress(psutil.Error):  # a worker that already exited
                total += worker.io_counters().read_chars
        return total

    # Wait for the state, not for time: the workers are past their headers and reading.
    while bytes_read() < 1 << 20 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert bytes_read() >= 1 << 20, "the workers never started reading"
    for worker in spawned:
        worker.send_signal(signal.SIGSTOP)
    os.kill(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert json.loads(out)["status"] == "cancelled"
    # The CLI reaped its workers before exiting: none is running, not even as a zombie.
    assert not [w for w in spawned if w.is_running()]


def test_load_json_with_samples(modelmon, sharded_model: Path) -> None:
    done = modelmon("load", str(sharded_model), "--json", "--samples", "--interval-ms", "20")
    data = json.loads(done.stdout)
    series = data["samples"]["series"]
    assert {"load_mbps", "iowait_pct", "workers_rss", "resident_fraction"} <= set(series)
    assert len(series["load_mbps"]["t"]) == len(series["load_mbps"]["v"]) >= 1
    pattern = data["samples"]["access_pattern"]
    assert len(pattern["offset"]) == len(pattern["start"]) > 0


def test_load_applies_a_config_file_and_flags_given_override_it(
    modelmon, sharded_model: Path, tmp_path: Path
) -> None:
    config = tmp_path / "modelmon.toml"
    config.write_text(
        'format_version = 1\n[recommended]\nstrategy = "pread"\nworkers = 2\nthreads = 1\n'
        'chunk_mib = 2\ncache = "keep"\n'
    )
    done = modelmon("load", str(sharded_model), "--config", str(config), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["strategy"] == "pread" and data["status"] == "ok"
    options = data["options"]
    assert (options["workers"], options["threads"], options["chunk"]) == (2, 1, 2 << 20)
    assert options["cache"] == "keep"  # the file's, not the flag's default (cold)
    done = modelmon(
        "load",
        str(sharded_model),
        "--config",
        str(config),
        "--workers",
        "3",
        "--cache",
        "cold",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    options = json.loads(done.stdout)["options"]
    assert (options["workers"], options["chunk"], options["cache"]) == (3, 2 << 20, "cold")
    bad = tmp_path / "bad.toml"
    bad.write_text('format_version = 1\n[recommended]\nstrategy = "pread"\nworkers = "many"\n')
    done = modelmon("load", str(sharded_model), "--config", str(bad))
    assert done.returncode != 0 and "recommended.workers" in done.stderr


def test_a_config_from_another_model_warns_one_line_as_the_library_does(
    modelmon, sharded_model: Path, tmp_path: Path
) -> None:
    """``load --config`` applies a config as ``core.load(config=)`` does (``apply_config``):
    measured on another model, it still applies, with the library's warning as one line."""
    config = tmp_path / "other.toml"
    config.write_text(
        'format_version = 1\n[recommended]\nstrategy = "pread"\nworkers = 2\n'
        "[identity]\ntensors = 1\ntensor_bytes = 1\n"
    )
    with pytest.warns(ConfigMismatchWarning) as caught:
        apply_config(config, open_model(sharded_model))
    (library,) = [str(w.message) for w in caught]
    done = modelmon("load", str(sharded_model), "--config", str(config), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["options"]["workers"] == 2  # applied anyway
    assert done.stderr.splitlines() == [f"modelmon: warning: {library}"]
    assert "measured on a different model or storage (tensors 1 → " in library


def test_a_configs_readahead_that_cannot_be_set_is_left_out_as_the_library_does(
    modelmon, model_without_readahead: Path, tmp_path: Path
) -> None:
    """A config's readahead where this process may not set it (tmpfs has none): the load runs
    with the device as it is and says so in one line, as ``core.load(config=)`` does. Asked
    for with the flag, a readahead that cannot be set is still refused."""
    model = model_without_readahead
    config = tmp_path / "modelmon.toml"
    config.write_text(
        'format_version = 1\n[recommended]\nstrategy = "sequential"\nreadahead = 4096\n'
    )
    with pytest.warns(ReadaheadSkippedWarning) as caught:
        applied = apply_config(config, open_model(model))
    assert applied.options.readahead is None
    (library,) = [str(w.message) for w in caught]
    done = modelmon("load", str(model), "--config", str(config), "--cache", "keep", "--json")
    assert done.returncode == 0, done.stderr
    assert "readahead" not in json.loads(done.stdout)["options"]  # left as it is
    assert done.stderr.splitlines() == [f"modelmon: warning: {library}"]
    assert "its readahead of 4096 KiB is not applied" in library
    asked = ("--config", str(config), "--readahead", "4096", "--cache", "keep")
    refused = modelmon("load", str(model), *asked)
    assert refused.returncode == 2 and "readahead" in refused.stderr


def test_readahead_where_it_cannot_be_set_is_one_line_usage_error(
    modelmon, model_without_readahead: Path
) -> None:
    done = modelmon("load", str(model_without_readahead), "--readahead", "4096", "--cache", "keep")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "readahead" in done.stderr
    assert "Traceback" not in done.stderr


def test_prime_memory_says_why_nothing_was_primed(modelmon, sharded_model: Path) -> None:
    on = modelmon("load", str(sharded_model), "--prime-memory", "on", "--json")
    assert on.returncode == 0, on.stderr
    primed = json.loads(on.stdout)["cache"]["primed"]
    assert primed["bytes"] == 0 and primed["why"] == "not primed: under 256 MiB"
    off = modelmon("load", str(sharded_model), "--prime-memory", "off", "--json")
    assert off.returncode == 0, off.stderr
    primed = json.loads(off.stdout)["cache"]["primed"]
    # Said only where a host takes freed memory back: elsewhere priming never applied.
    assert primed["bytes"] == 0 and primed["why"] in ("", "not primed: priming is off")
    bad = modelmon("load", str(sharded_model), "--prime-memory", "always")
    assert bad.returncode == 2 and "--prime-memory" in bad.stderr


PRIME_MIN = 256 * MiB  # less is not worth priming (host_memory.PRIME_MIN)
# What caps a priming, or declines it, when the machine's memory is short (plan_priming).
ROOM = (
    r"(half of the \S+ GiB available|all but 512 MiB of the \S+ GiB free"
    r"|all but 512 MiB of the \S+ GiB its memory cgroup has left)"
)
CAPPED = f"capped at {ROOM}"
DECLINED = rf"not primed: ({ROOM} is under 256 MiB|tasks stalled on memory \S+% of the last 10 s)"


def test_priming_covers_the_arrays_a_load_keeps_and_nothing_for_a_discard_load(
    modelmon, tmp_path: Path
) -> None:
    """Priming never holds more than the load: a cold discard load keeps nothing (its page
    cache is reclaimable), a load to RAM its arrays; the JSON says what was primed and why,
    and the parent's peak leaves the priming out. How much of the arrays the machine has
    room for is its own state when the run plans (free memory, pressure: ``plan_priming``,
    checked fact by fact in tests/core/system/test_host_memory.py): the plan the run
    recorded covers the arrays, and primes them all or says what capped it."""
    from ...core.loading.sparse import sparse_model

    model = str(sparse_model(tmp_path, tensors=5, tensor_bytes=64 * MiB))  # 320 MiB, a hole
    discard = modelmon("load", model, "--discard", "--prime-memory", "on", "--json")
    assert discard.returncode == 0, discard.stderr
    primed = json.loads(discard.stdout)["cache"]["primed"]
    assert primed["bytes"] == 0 and primed["wanted"] == 0, primed
    assert primed["why"].startswith("not primed: the load keeps no arrays"), primed
    kept = modelmon("load", model, "--prime-memory", "on", "--json")
    assert kept.returncode == 0, kept.stderr
    data = json.loads(kept.stdout)
    primed = data["cache"]["primed"]
    assert primed["wanted"] == 320 * MiB, primed  # the arrays, not their page cache too
    if primed["why"] == "the load's arrays":
        assert primed["bytes"] == 320 * MiB, primed
    elif primed["bytes"] > 0:  # the machine had room for part of them: what capped it
        assert re.fullmatch(CAPPED, primed["why"]), primed
        assert PRIME_MIN <= primed["bytes"] < 320 * MiB, primed
    else:  # no room worth priming, or tasks stalled on memory: why not
        assert re.fullmatch(DECLINED, primed["why"]), primed
    # The priming is not in the parent's peak (an interpreter with numpy, far under it).
    assert data["parent_peak_rss"] < (primed["bytes"] or 320 * MiB), data["parent_peak_rss"]


def test_load_reports_the_whole_process_trees_peak_beside_the_workers(
    modelmon, sharded_model: Path
) -> None:
    done = modelmon("load", str(sharded_model), "--workers", "2", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    workers = sum(w["peak_rss"] for w in data["workers"])
    assert data["workers_peak_rss"] == workers > 0
    assert data["process_tree_peak_rss"] == data["parent_peak_rss"] + workers
    assert data["parent_peak_rss"] > 10 << 20  # an interpreter with numpy at least
    text = modelmon("load", str(sharded_model))
    assert text.returncode == 0, text.stderr
    assert "in all of modelmon's processes" in text.stdout
