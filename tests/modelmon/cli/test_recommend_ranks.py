"""recommend --ranks N --memory-limit: the ways N ranks may load, measured under the limit;
a way whose copies cannot fit is refused before it runs; the line it says to paste loads
every tensor in each rank under that limit."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from modelmon.core import write_safetensors_model

from ...core.system.test_memory_cgroup import REAL

MODELMON = [sys.executable, "-m", "modelmon"]
pytestmark = REAL  # every way runs under the limit, in a memory cgroup


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """68 MB: four whole copies need more than 256 MiB; a slice or one copy far less."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("ranked"), layers=2, hidden=1024, vocab=4096, seed=31
    )


@pytest.mark.timeout(400)  # the search, the pasted line, the config applied three ways
def test_whole_is_refused_and_the_pick_loads_every_tensor_in_each_rank(
    model: Path, tmp_path: Path
) -> None:
    config = tmp_path / "ranks.toml"
    done = subprocess.run(
        [
            *MODELMON,
            "recommend",
            str(model),
            "--ranks",
            "4",
            "--memory-limit",
            "256Mi",
            "--budget",
            "10",
            "-o",
            str(config),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    ways = {(w["mode"], w["strategy"]): w for w in found["ways"]}
    for strategy in ("sequential", "direct"):
        refused = ways[("whole", strategy)]["refused"]
        assert refused and refused.startswith("needs more than")  # never run
        assert ways[("whole", strategy)]["run_seconds"] == []
    pick = found["pick"]
    assert pick["mode"] in ("slice", "one-reader") and pick["fits"]
    assert found["holds_at_bytes"] and found["holds_at_bytes"] <= 256 << 20
    document = config.read_text()
    assert "[ranks]" in document and f'mode = "{pick["mode"]}"' in document
    # The modelmon line, as written, under the limit: every rank has every tensor.
    line = next(x for x in document.splitlines() if x.startswith("modelmon = "))
    words = shlex.split(json.loads(line.split(" = ", 1)[1]))
    assert words[1] == "load" and "--memory-limit" in words
    ran = subprocess.run(  # as pasted: its command by its path, found without the venv's PATH
        [*words, "--json"], capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["status"] == "ok" and result["mode"] == pick["mode"]
    assert len(result["ranks"]) == 4 and all(r["status"] == "ok" for r in result["ranks"])
    # The config alone applies wholly: its mode, and its rank count where none is given.
    for extra in ([], ["--ranks", "4"]):
        load = [*MODELMON, "load", str(model), "--config", str(config), "--memory-limit", "256Mi"]
        applied = subprocess.run(
            [*load, *extra, "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert applied.returncode == 0, applied.stderr
        loaded = json.loads(applied.stdout)
        assert loaded["mode"] == pick["mode"] and len(loaded["ranks"]) == 4
    # A flag that contradicts it is said, and whole, which cannot fit, refused before it runs.
    refused = subprocess.run(
        [*load, "--ranks-mode", "whole"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert any(f"--ranks-mode whole, not {config}'s {pick['mode']}" in line for line in lines)
    assert "4 ranks whole do not fit in 256 MiB" in lines[-1], lines[-1]
    assert f"{pick['mode']} holds" in lines[-1]
    # Below what the config measured its ranks to hold that no reclaim frees: refused too.
    small = subprocess.run([*load[:-1], "32Mi"], capture_output=True, text=True, timeout=60)
    assert small.returncode == 1, small.stderr
    assert f"{config}'s 4 ranks {pick['mode']} held " in small.stderr
    assert "--memory-limit 32 MiB is below it; it holds at " in small.stderr


def test_a_ranks_mode_without_ranks_is_refused_by_every_verb(model: Path) -> None:
    for verb in (["load", str(model)], ["bench", str(model), "--a", "pread", "--b", "pread"]):
        done = subprocess.run(
            [*MODELMON, *verb, "--ranks-mode", "slice"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, (verb, done.stderr)
        assert done.stderr.strip().splitlines()[-1] == (
            "modelmon: --ranks-mode is how --ranks N ranks get their weights: give --ranks"
        )


def test_the_python_line_of_a_slice_pick_loads_each_ranks_part(model: Path) -> None:
    """What a slice pick says to paste in each rank, run in 2 processes: their parts of every
    tensor make each tensor whole."""
    code = (
        "import sys, numpy as np, modelmon.core as m\n"
        "got = m.load(sys.argv[1], rank=(int(sys.argv[2]), 2))\n"
        "np.savez(sys.argv[3], **got)\n"
    )
    parts = []
    for rank in range(2):
        out = Path(f"{model.parent}/part{rank}.npz")
        subprocess.run([sys.executable, "-c", code, str(model), str(rank), str(out)], check=True)
        parts.append(np.load(out))
    whole = np.load(str(model.parent / "part0.npz"))  # names
    from safetensors.numpy import load_file

    full = load_file(str(model))
    assert set(whole.files) == set(full)
    for name, array in full.items():
        if array.ndim < 2:
            continue
        axis = 1 if "o_proj" in name or "down_proj" in name else 0
        assert np.array_equal(np.concatenate([p[name] for p in parts], axis=axis), array)


def test_a_ranks_config_into_a_pipe_names_a_copy_and_its_answer_goes_to_stderr(
    model: Path, tmp_path: Path
) -> None:
    """``recommend --ranks 2 -o - | cat``: standard output carries the config alone (the
    answer goes to stderr), and the paste line names a copy kept in the state folder, a file
    that exists (walk 20: a line naming a modelmon.toml that was never written)."""
    state = tmp_path / "state"
    done = subprocess.run(
        [*MODELMON, "recommend", str(model), "--ranks", "2", "--budget", "10", "-o", "-"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "XDG_STATE_HOME": str(state)},
    )
    assert done.returncode == 0, done.stderr
    kept = list((state / "modelmon" / "recommendations").glob("*.toml"))
    assert len(kept) == 1 and kept[0].read_text() == done.stdout, kept
    document = tomllib.loads(done.stdout)  # the config alone, nothing else
    assert str(kept[0]) in document["apply"]["modelmon"]
    assert "Paste (modelmon): " in done.stderr and str(kept[0]) in done.stderr
    assert sorted(os.listdir(tmp_path)) == ["state"]
