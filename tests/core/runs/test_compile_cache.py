"""A server's compile caches as modelmon's folders: fresh for each run, kept for a program's
runs, every one gone at the experiment's end, and when modelmon was killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelmon.core.configuration import parse_configuration, parse_program
from modelmon.core.errors import OptionsError
from modelmon.core.runs.compile_cache import CACHE_VARIABLES, CompileCaches, remove_stale

SERVER = "vllm serve {path} --enforce-eager"


def test_the_spec_words_are_read_back_and_checked() -> None:
    program = parse_program(f"cmd: page_cache=warm compile_cache=kept {SERVER}")
    assert (program.page_cache, program.compile_cache) == ("warm", "kept")
    assert parse_configuration(program.spec) == program
    assert program.environment("/m") == {}  # modelmon's words, not the command's
    fresh = parse_program(f"cmd: compile_cache=fresh {SERVER}")
    # A kept cache is filled by an uncounted run of its own, not the fresh one's.
    assert fresh.code != program.code
    with pytest.raises(OptionsError, match="compile_cache must be one of fresh, kept"):
        parse_program(f"cmd: compile_cache=always {SERVER}")
    with pytest.raises(OptionsError, match="page_cache must be one of cold, warm"):
        parse_program(f"cmd: page_cache=hot {SERVER}")


def test_fresh_folders_go_with_their_run_and_kept_ones_with_the_experiment(
    tmp_path: Path,
) -> None:
    fresh = parse_program(f"cmd: compile_cache=fresh {SERVER}")
    kept = parse_program(f"cmd: compile_cache=kept {SERVER}")
    plain = parse_program(f"cmd: {SERVER}")
    with CompileCaches(str(tmp_path)) as caches:
        with caches.environment(plain) as none:
            assert none == {}
        with caches.environment(fresh) as first:
            assert set(first) == set(CACHE_VARIABLES)
            Path(first["VLLM_CACHE_ROOT"], "graph.bin").write_bytes(b"x" * 100)
        assert not Path(first["VLLM_CACHE_ROOT"]).exists()
        with caches.environment(fresh) as second:
            assert second["VLLM_CACHE_ROOT"] != first["VLLM_CACHE_ROOT"]
        with caches.environment(kept) as one:
            Path(one["TORCHINDUCTOR_CACHE_DIR"], "kernel.so").write_bytes(b"y" * 1000)
        with caches.environment(kept) as again:
            assert again == one and Path(again["TORCHINDUCTOR_CACHE_DIR"], "kernel.so").exists()
        assert caches.kept_bytes(kept) == 1000
        root = caches.root
        assert root.parent == tmp_path and os.environ.get("VLLM_CACHE_ROOT") != str(root)
    assert not root.exists()


def test_a_killed_modelmons_folders_are_removed(tmp_path: Path) -> None:
    """SIGKILL leaves no way out: the guardian removes the root once its owner is gone, and
    the next experiment removes what a dead owner left."""
    script = (
        "import sys, time\n"
        "from modelmon.core.runs.compile_cache import CompileCaches\n"
        "caches = CompileCaches(sys.argv[1])\n"
        "print(caches.root, flush=True)\n"
        "time.sleep(60)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert owner.stdout is not None
    root = Path(owner.stdout.readline().strip())
    assert root.is_dir()
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + 20
    while root.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not root.exists()
    left = tmp_path / "modelmon-compile-999999-5-x"
    left.mkdir()
    assert remove_stale(tmp_path) == [left]
