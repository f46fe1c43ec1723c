"""A real serving engine, as users run it: ``transformers serve`` (FastAPI under uvicorn) of a
small Llama-shaped checkpoint this test writes (weights, config, a word-level tokenizer),
preloaded (``FORCE_MODEL``) and ready when its ``/health`` answers. Watched, its cold start
is its own lines on the bytes' timeline; two starts of it A/B'd, by their time to ready."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from modelmon.core import write_safetensors_model

from .conftest import RunCli

TRANSFORMERS = Path(sys.executable).parent / "transformers"
pytest.importorskip(
    "fastapi",
    reason="transformers serve is not installed here: pip install 'transformers[serving]'",
)
pytest.importorskip("tokenizers", reason="transformers is not installed here")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder transformers serve preloads: 24 MB of weights, its config, a tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = tmp_path_factory.mktemp("real-server")
    write_safetensors_model(
        folder, layers=2, hidden=512, vocab=4096, seed=13, transformers_config=True
    )
    words = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, 4096)}}
    tokenizer = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    settings = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    return folder


def serve(port: int) -> str:
    return f"{TRANSFORMERS} serve {{path}} --port {port} --device cpu"


def test_a_real_servers_cold_start_is_read_with_its_own_lines(
    modelmon: RunCli, served: Path
) -> None:
    port = free_port()
    done = modelmon(
        "watch",
        "--json",
        "--ready-url",
        f"http://127.0.0.1:{port}/health",
        "--ready-timeout",
        "300",
        "--model",
        str(served / "model.safetensors"),
        "--",
        "env",
        "HF_HUB_OFFLINE=1",
        *serve(port).replace("{path}", str(served)).split(),
        timeout=360,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    cold = report["cold_start"]
    assert cold["ready_by"] == "url" and report["ended_by"] == "ready"
    assert report["cache"]["cold"] and report["bytes_read"] >= 0.9 * report["model_bytes"]
    names = [phase["name"] for phase in cold["phases"]]
    assert names == ["before", "weights", "after"]
    lines = {line["name"]: line for line in cold["lines"]}
    assert {"Loading model", "Loading weights", "startup complete"} <= set(lines), lines
    weights = next(p for p in cold["phases"] if p["name"] == "weights")
    # Its own span of the weights holds the bytes' arrival.
    assert lines["Loading weights"]["start_s"] <= weights["start_s"] + 0.5
    assert lines["Loading weights"]["end_s"] >= weights["end_s"] - 0.5
    assert lines["startup complete"]["start_s"] <= cold["ready_s"] + 0.5
    assert len(cold["ranks"]) == 1


def test_two_starts_of_a_real_server_are_compared_by_their_time_to_ready(
    modelmon: RunCli, served: Path
) -> None:
    """The page cache cold against a pre-warmed node's: what warming it saves is measured,
    and said, beyond the noise or not."""
    port = free_port()
    done = modelmon(
        "bench",
        str(served),
        "--a",
        f"cmd: HF_HUB_OFFLINE=1 {serve(port)}",
        "--b",
        f"cmd: page_cache=warm HF_HUB_OFFLINE=1 {serve(port)}",
        "-n",
        "1",
        "--ready-url",
        f"http://127.0.0.1:{port}/health",
        "--ready-timeout",
        "300",
        "--json",
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["by"] == "ready"
    sides = {run["side"]: run for run in report["runs"]}
    assert sides["A"]["cache"]["cold"] and sides["B"]["cache"]["warm"]
    for run in report["runs"]:
        assert run["status"] == "ok" and run["ready_s"] > 0
        assert run["watched"]["cold_start"]["ready_by"] == "url"
