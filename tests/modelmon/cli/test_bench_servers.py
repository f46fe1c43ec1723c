"""``modelmon bench`` of two servers: each run started from the asked cache state, stopped at
ready with everything it started, compared by its time to ready, each phase beside it. The
server is tests/serve_bed.py (imports, its weights read for real, a CPU-bound step, then it
listens); B reads its weights paced, so the phase that differs is known."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from modelmon.core import write_safetensors_model

from .conftest import RunCli

BED = Path(__file__).resolve().parents[2] / "serve_bed.py"
QUICK = "--import-s 0.2 --other-mb 1 --post-s 0.3"


def server(*words: str) -> str:
    return f"cmd: {sys.executable} {BED} {{path}} {QUICK} {' '.join(words)}".strip()


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 MB: unpaced its weights take a few samples; paced at 8 MB/s, about 2 s."""
    folder = tmp_path_factory.mktemp("bench-servers")
    return write_safetensors_model(folder, layers=2, hidden=512, vocab=4096, seed=8)


def test_two_servers_are_compared_by_their_time_to_ready(modelmon: RunCli, model: Path) -> None:
    done = modelmon(
        "bench",
        str(model),
        "--a",
        server(),
        "--b",
        server("--pace-mbps", "8"),
        "-n",
        "2",
        "--json",
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["by"] == "ready" and report["verdict"]["by"] == "ready"
    for run in report["runs"]:
        assert run["status"] == "ok" and run["cache"]["cold"], run["error"]
        cold = run["watched"]["cold_start"]
        assert run["ready_s"] == pytest.approx(cold["ready_s"], abs=1e-3)
        assert set(run["phases"]) >= {"before", "weights", "after"}
        assert run["watched"]["ended_by"] == "ready"
    a, b = report["a"], report["b"]
    assert b["median_ready_s"] > a["median_ready_s"] + 1.0
    # A's time to ready over B's: below 1, A ready sooner, and the weights say why.
    assert all(ratio < 1 for ratio in report["ratios"])
    assert report["verdict"]["text"] == "A faster"
    shifts = {shift["name"]: shift for shift in report["phases"]}
    assert shifts["weights"]["differs"] and shifts["weights"]["change_s"] > 1.0
    assert not shifts["before"]["differs"]


def test_the_text_names_the_phase_that_differs(modelmon: RunCli, model: Path) -> None:
    done = modelmon(
        "bench", str(model), "--a", server("--pace-mbps", "8"), "--b", server(), "-n", "1"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["side", "configuration", "ready", "min–max"]
    verdict = next(line for line in lines if line.startswith("verdict: "))
    assert verdict.startswith("verdict: B was ready ") and "the one pair run" in verdict
    where = next(line for line in lines if line.startswith("where: "))
    assert where.startswith("where: the weights ") and "the rest equal" in where


def test_a_server_never_ready_fails_at_its_timeout(modelmon: RunCli, model: Path) -> None:
    done = modelmon(
        "bench",
        str(model),
        "--a",
        server(),
        "--b",
        server("--never-ready"),
        "-n",
        "1",
        "--ready-timeout",
        "4",
        timeout=120,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("modelmon: A/B stopped: B run 1 failed: not ready within 4 s"), last


def test_a_server_beside_a_load_is_refused_in_one_line(modelmon: RunCli, model: Path) -> None:
    done = modelmon("bench", str(model), "--a", server(), "--b", "sequential", "-n", "1")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "A was ready as a server and B ended as a load" in last
    assert "compare servers with servers" in last


def test_servers_from_a_warm_page_cache(modelmon: RunCli, model: Path) -> None:
    """What a pre-warmed node saves: a server is timed to its ready from any cache; nothing
    arrives, and its weights phase is its processes' own reading. Paced, so that its reading
    lasts several looks: from a warm cache, unpaced, the server maps and copies its 16 MB
    within a few milliseconds, which a look 0.1 s apart may not see."""
    done = modelmon(
        "bench",
        str(model),
        "--a",
        server("--pace-mbps", "40"),
        "--b",
        server("--pace-mbps", "40", "--post-s", "1.5"),
        "-n",
        "1",
        "--cache",
        "warm",
        "--json",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["by"] == "ready" and report["cache"] == "warm"
    for run in report["runs"]:
        assert run["cache"]["warm"] and run["ready_s"] > 0
    assert report["b"]["phases"]["after"] > report["a"]["phases"]["after"] + 0.8


def test_a_bad_ready_line_is_refused_before_anything_runs(modelmon: RunCli, model: Path) -> None:
    done = modelmon(
        "bench", str(model), "--a", server(), "--b", server(), "--ready-line", "(unclosed"
    )
    assert done.returncode == 2
    assert "--ready-line is not a regular expression" in done.stderr


def test_a_kept_compile_cache_against_a_fresh_one(
    modelmon: RunCli, model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server compiles for 1.5 s of CPU into its compile cache and reads it back at its
    next start: modelmon points the cache at a new folder each run (fresh) or at one kept
    across the side's runs, filled by its uncounted run (kept); the user's own is untouched."""
    scratch = tmp_path / "tmp"  # this run's temporary folders, apart from other tests'
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    compiling = server("--phase-lines", "--compile-s", "1.5")
    own = Path.home() / ".cache" / "serve_bed"  # the server's own folder, where no variable
    before = sorted(own.rglob("*")) if own.exists() else None  # names another
    done = modelmon(
        "bench",
        str(model),
        "--a",
        compiling.replace("cmd: ", "cmd: compile_cache=fresh ", 1),
        "--b",
        compiling.replace("cmd: ", "cmd: compile_cache=kept ", 1),
        "-n",
        "2",
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    where = next(line for line in lines if line.startswith("where: "))
    assert "its line 'torch.compile' 1." in where and "→ 0.0 s" in where, where
    saved = next(line for line in lines if line.startswith("cache: "))
    assert saved.startswith("cache: persisting its compile caches (TORCHINDUCTOR_CACHE_DIR) saves")
    after = sorted(own.rglob("*")) if own.exists() else None
    assert after == before, "the server's own cache folder was used"
    assert not list(scratch.glob("modelmon-compile-*"))
