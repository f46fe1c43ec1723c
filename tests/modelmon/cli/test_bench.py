"""``modelmon bench``: an A/B from the command line; both spellings of a configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelmon.cli.bench import parse_config_spec
from modelmon.core import parse_configuration
from modelmon.core.errors import OptionsError


def test_bench_json(modelmon, sharded_model: Path) -> None:
    done = modelmon(
        "bench",
        str(sharded_model),
        "--a",
        "mmap-shared-fd workers=2",
        "--b",
        "sequential workers=2",
        "-n",
        "2",
        "--json",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [r["side"] for r in data["runs"]] == ["A", "B", "A", "B"]
    assert all(r["cache"]["resident_before"] <= 0.01 for r in data["runs"])
    assert data["verdict"]["text"] in ("A faster", "B faster", "within noise")
    assert len(data["ratios"]) == 2 and data["a"]["spec"] == "mmap-shared-fd workers=2"
    for side in ("a", "b"):  # the load's own peak and the whole process tree's
        runs = [r for r in data["runs"] if r["side"] == side.upper()]
        assert data[side]["peak_rss"] == max(r["workers_peak_rss"] for r in runs) > 0
        tree = max(r["process_tree_peak_rss"] for r in runs)
        assert data[side]["process_tree_peak_rss"] == tree > data[side]["peak_rss"]


def test_bench_table_and_bad_spec(modelmon, sharded_model: Path) -> None:
    done = modelmon("bench", str(sharded_model), "--a", "pread", "--b", "sequential", "-n", "1")
    assert done.returncode == 0, done.stderr
    assert "verdict:" in done.stdout and "B/A per pair" in done.stdout
    assert "peak RSS: workers / all" in done.stdout
    done = modelmon("bench", str(sharded_model), "--a", "pread workers=lots", "--b", "sequential")
    assert done.returncode == 2 and "workers" in done.stderr
    done = modelmon("bench", str(sharded_model), "--a", "pread --workers lots", "--b", "sequential")
    assert done.returncode == 2 and "--workers" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("flags", "names"),
    [
        ("sequential --workers 4", "sequential workers=4"),
        ("sequential -w 4 --chunk-mib 16", "sequential workers=4 chunk=16MiB"),
        ("--strategy pread --threads 2 --verify", "pread threads=2 verify=true"),
        ("mmap --madvise sequential --discard", "mmap madvise=sequential discard=true"),
        ("sequential workers=4 --fadvise random", "sequential workers=4 fadvise=random"),
        ("warmup --prefetch both --cache keep", "warmup prefetch=both"),
        ("direct", "direct"),
        ("mmap --readahead 4MiB", "mmap readahead=4096"),
        ("sequential --readahead 128", "sequential readahead=128"),
    ],
)
def test_a_spec_takes_loads_flags_or_names(flags: str, names: str) -> None:
    assert parse_config_spec(flags, "--a") == parse_configuration(names)
    assert parse_config_spec(names, "--a") == parse_configuration(names)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("sequential --workers", "--workers"),
        ("sequential --workers 0", "workers"),
        ("sequential --fadvise fast", "--fadvise"),
        ("sequential --teleport", "--teleport"),
        ("--workers 4", "empty strategy spec"),
        ("sequential 4", "name=value"),
        ("sequential --readahead 1000B", "--readahead"),
    ],
)
def test_a_bad_spec_is_an_options_error_naming_the_flag(spec: str, message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        parse_config_spec(spec, "--b")


def test_a_bad_spec_is_one_line_naming_the_flag_once(modelmon, sharded_model: Path) -> None:
    """ "modelmon: bench --b: …", not "modelmon: modelmon bench --b: …"."""
    done = modelmon("bench", str(sharded_model), "--a", "sequential", "--b", "pread --bogus")
    assert done.returncode == 2
    assert done.stderr == (
        "modelmon: bench --b: unknown option '--bogus' (see modelmon load --help)\n"
    )
    done = modelmon("bench", str(sharded_model), "--a", "pread -w 0", "--b", "sequential")
    assert done.returncode == 2 and done.stderr.startswith("modelmon: bench --a: argument --work")


def test_runs_that_shared_the_device_are_named_under_the_verdict() -> None:
    from types import SimpleNamespace

    from modelmon.cli.bench import shared_device_lines

    alone = SimpleNamespace(overlapped_by=None)
    shared = SimpleNamespace(overlapped_by="pid 812 (modelmon recommend m.gguf)")
    runs = [("A", alone), ("B", alone), ("A", shared), ("B", shared)]
    (line,) = shared_device_lines(SimpleNamespace(runs=runs))  # type: ignore[arg-type]
    assert line.startswith("note: A run 2, B run 2 shared the device with other modelmon runs")
    assert line.count("pid 812") == 1 and "during the timed load" not in line
    assert shared_device_lines(SimpleNamespace(runs=runs[:2])) == []  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def one_file_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from modelmon.core import write_safetensors_model

    return write_safetensors_model(tmp_path_factory.mktemp("one-file"), layers=2, hidden=512)


# A "server": reads its model whole, then serves forever (never exits by itself).
SERVER = "import sys, time; open(sys.argv[1], 'rb').read(); time.sleep(3600)"
# One that reads a page of its model and serves forever: it never loads the whole model.
LAZY_SERVER = "import sys, time; open(sys.argv[1], 'rb').read(4096); time.sleep(3600)"


def test_bench_ends_a_server_once_its_model_has_arrived(modelmon, one_file_model: Path) -> None:
    """A command that loads and then serves is timed by its load and ended: the A/B ends."""
    server = f'cmd: python -c "{SERVER}" {{path}}'
    done = modelmon(
        "bench",
        str(one_file_model),
        "--a",
        server,
        "--b",
        "pread",
        "-n",
        "1",
        "--json",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)["runs"][0]
    assert first["status"] == "ok" and first["bytes"] == one_file_model.stat().st_size
    assert any("a server that loaded and serves" in note for note in first["notes"])


def test_bench_stops_a_run_at_its_time_limit(modelmon, one_file_model: Path) -> None:
    """One that never loads its whole model is stopped at --time-limit, not waited on."""
    lazy = f'cmd: python -c "{LAZY_SERVER}" {{path}}'
    done = modelmon(
        "bench",
        str(one_file_model),
        "--a",
        lazy,
        "--b",
        "pread",
        "-n",
        "1",
        "--time-limit",
        "3",
        timeout=120,
    )
    assert done.returncode != 0
    assert "stopped at its time limit" in done.stderr, done.stderr


def test_bench_checks_an_engine_before_running_anything(modelmon, one_file_model: Path) -> None:
    """An engine that cannot load this model (its format) is refused in one line, before the
    other side or a warm-up runs."""
    done = modelmon("bench", str(one_file_model), "--a", "engine: llamacpp", "--b", "pread")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "modelmon: --a engine: llamacpp: llama-cpp-python loads gguf models; this one is "
        "safetensors"
    )
