"""``modelmon bench``: an A/B from the command line; both spellings of a configuration."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from modelmon.cli.bench import parse_config_spec
from modelmon.core import parse_configuration
from modelmon.core.errors import OptionsError

from ...leaks import process_state


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


def test_bench_refuses_an_engine_not_installed_before_running_anything(
    modelmon, one_file_model: Path
) -> None:
    engines = json.loads(modelmon("engines", "--json").stdout)
    missing = [
        e["name"]
        for e in engines
        if "safetensors" in e["formats"] and "is not installed here" in (e["unavailable"] or "")
    ]
    if not missing:
        pytest.skip("every engine of safetensors files is installed here")
    done = modelmon("bench", str(one_file_model), "--a", f"engine: {missing[0]}", "--b", "pread")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"modelmon: --a engine: {missing[0]}: ") and "not installed" in line


# A command that daemonizes (fork, setsid, fork again; the middle one exits at once) and
# leaves the daemon to read the model and serve: bench ends the daemon with the run.
DAEMON = (
    "import os, sys, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        open(sys.argv[2], 'a').write(f'{os.getpid()}\\n')\n"
    "        open(sys.argv[1], 'rb').read()\n"
    "        time.sleep(3600)\n"
    "    os._exit(0)\n"
    "os.wait()\n"
)


def test_bench_ends_the_daemon_a_command_leaves(
    modelmon, one_file_model: Path, tmp_path: Path
) -> None:
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    pids = tmp_path / "daemons"
    command = f"cmd: python {script} {{path}} {pids}"
    done = modelmon(
        "bench", str(one_file_model), "--a", command, "--b", "pread", "-n", "1", "--json",
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)["runs"][0]
    assert first["status"] == "ok" and first["bytes"] == one_file_model.stat().st_size
    for pid in pids.read_text().split():  # one per run of A (the warm-up's too)
        assert process_state(int(pid)) in ("Z", "gone"), f"{pid} runs on"


def test_the_measured_command_never_waits_on_modelmons_standard_input(
    modelmon_argv: list[str], one_file_model: Path
) -> None:
    """modelmon's stdin is a pipe that stays open (``sleep 40 | modelmon bench …``): a command
    that reads its stdin first gets end of file, not the pipe, and the A/B ends."""
    import subprocess

    reader = "import sys; sys.stdin.read(); open(sys.argv[1], 'rb').read()"
    reader_cmd = f'cmd: python -c "{reader}" {{path}}'
    argv = [*modelmon_argv, "bench", str(one_file_model), "--a", reader_cmd,
            "--b", "pread", "-n", "1", "--json"]  # fmt: skip
    read_end, write_end = os.pipe()  # the write end stays open, as sleep's would
    try:
        with subprocess.Popen(
            argv, stdin=read_end, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as bench:
            try:
                out, err = bench.communicate(timeout=120)
            finally:
                bench.kill()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert bench.returncode == 0, err
    assert json.loads(out)["runs"][0]["status"] == "ok"
