"""The paste-ready lines for each loader people use: their exact text (the model's own path
in, quoted for the line's language, no remark inside), what stands behind each, and which
line matches the pick."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core.configuration import parse_engine
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.model.formats import open_model
from modelmon.core.output import safetensors_lines
from modelmon.core.output.paste import is_shell, pasteable
from modelmon.core.output.snippets import apply_snippets, matching, servers_left_out, snippets

from ...object_store import BUCKET
from ..measuring.records import candidate, run

FOLDER = "/models/my model"  # a space: every line must quote it
SAFETENSORS = SimpleNamespace(
    format="safetensors",
    path=f"{FOLDER}/model.safetensors",
    files=(SimpleNamespace(path=f"{FOLDER}/model.safetensors", remote=None),),
    extents=(),
    kind=None,
)
GGUF = SimpleNamespace(
    format="gguf",
    path=f"{FOLDER}/m.gguf",
    files=(SimpleNamespace(path=f"{FOLDER}/m.gguf", remote=None),),
    extents=(),
    kind=None,
)


def _runai(concurrency: int, *rates: float) -> Candidate:
    config = parse_engine(f"runai RUNAI_STREAMER_CONCURRENCY={concurrency}")
    return Candidate(config, "peer", [run(rate) for rate in rates])


def _named_by_the_server_they_run(lines: dict[str, str]) -> None:
    """A server's line is named by the server it runs, its load format beside (the tool
    column: vllm-runai_streamer, not runai_streamer)."""
    for tool, text in lines.items():
        if "vllm serve" in text:
            assert tool.startswith("vllm-"), tool
        elif "sglang.launch_server" in text:
            assert tool.startswith("sglang"), tool


def test_every_safetensors_line_is_pasted_as_it_is(
    transformers_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transformers model's folder (config.json): modelmon's line and its torch form, the
    safetensors library's, and vLLM's (which serves such a folder), each said why it is there."""
    monkeypatch.setattr(safetensors_lines, "torch_installed", lambda: True)
    model = open_model(transformers_model)
    folder = str(transformers_model.parent)
    file, served = repr(str(transformers_model)), shlex.quote(folder)
    winner = candidate("sequential", 900, 910, 905, workers=4, chunk=16 << 20)
    library = candidate("library", 400, 410, 405, role="baseline")
    whole = candidate("sequential", 500, 505, 510, workers=1, chunk=16 << 20)
    peers = (_runai(8, 700, 720, 710), _runai(16, 650, 660, 640))
    ranked = (winner, whole, library)
    lines = apply_snippets(model, winner, ranked, "/abs/m.toml", peers)
    load = f"modelmon.core.load({file}, config='/abs/m.toml')"
    files = repr([str(transformers_model)])
    every = "tensors = {name: tensor for path in " + files + " for name, tensor in "
    assert lines == {
        "modelmon": f"import modelmon.core; tensors = {load}",
        # The same load as torch tensors, each wrapping its array's memory (F16: as it is).
        "torch": "import modelmon.core, torch; tensors = "
        f"{{name: torch.from_numpy(array) for name, array in {load}.items()}}",
        # The library's own read of every tensor of every file, as measured: numpy arrays.
        "safetensors": f"import safetensors.numpy; {every}"
        "safetensors.numpy.load_file(path).items()}",
        "safetensors-torch": f"import safetensors.torch; {every}"
        "safetensors.torch.load_file(path).items()}",
        "safetensors-read": f"import pathlib, safetensors.numpy; {every}"
        "safetensors.numpy.load(pathlib.Path(path).read_bytes()).items()}",
        "vllm-eager": f"vllm serve {served} --safetensors-load-strategy eager",
        "vllm-lazy": f"vllm serve {served} --safetensors-load-strategy lazy",
        "vllm-prefetch": f"vllm serve {served} --safetensors-load-strategy prefetch",
        # Run:ai's line takes the concurrency of its best measured run.
        "vllm-runai_streamer": f"vllm serve {served} --load-format runai_streamer "
        "--model-loader-extra-config '{\"concurrency\": 8}'",
        "vllm-fastsafetensors": f"vllm serve {served} --load-format fastsafetensors",
    }
    _named_by_the_server_they_run(lines)
    for line in lines.values():  # each parses in its own language, as it is
        if is_shell(line):
            assert shlex.split(line)[0] == "vllm"
        else:
            ast.parse(line)
    evidence = {s.tool: s.evidence() for s in snippets(model, winner, ranked, "m.toml", peers)}
    why = "listed as vLLM serves this folder (a transformers model: config.json)"
    assert evidence == {
        "modelmon": "measured here as sequential workers=4 threads=1 chunk=16MiB: 905 MB/s",
        "torch": "modelmon.core.load returns {tensor name: numpy array}; torch.from_numpy "
        "shares each array's memory: torch tensors without a copy; measured here as "
        "sequential workers=4 threads=1 chunk=16MiB: 905 MB/s",
        "safetensors": "safe_open(framework='numpy').get_tensor of every tensor: numpy arrays; "
        "measured here as library threads=1: 405 MB/s",
        "safetensors-torch": "the same read into torch tensors: torch is installed here; not "
        "measured here: the safetensors line's read, into torch tensors",
        "safetensors-read": "each file read whole, no mmap: numpy arrays; measured here as "
        "sequential threads=1 chunk=16MiB: 505 MB/s",
        "vllm-eager": "measured here as sequential threads=1 chunk=16MiB: 505 MB/s; reads each "
        f"file whole into memory; {why}",
        "vllm-lazy": f"measured here as library threads=1: 405 MB/s; maps each file (vLLM's "
        f"default); {why}",
        "vllm-prefetch": "not measured here: reads the files into the page cache ahead, then "
        f"maps them; {why}",
        "vllm-runai_streamer": "or RUNAI_STREAMER_CONCURRENCY=8; measured here as engine: runai "
        f"RUNAI_STREAMER_CONCURRENCY=8: 710 MB/s; Run:ai Model Streamer's concurrent reads; "
        f"{why}; the fastest of vllm's lines measured here",
        "vllm-fastsafetensors": f"not measured here: fastsafetensors' parallel reads; {why}",
    }


def test_lines_are_only_for_loaders_that_read_a_checkpoint_of_its_kind(
    sharded_model: Path, diffusers_model: Path, bf16_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Llama's weights alone (no config.json): no pipeline line, no server line that could
    not serve the folder; a diffusers pipeline: its line, no vLLM's; bfloat16 arrays wrapped
    for torch through the unsigned integers of their width, still without a copy."""
    monkeypatch.setattr(safetensors_lines, "torch_installed", lambda: False)  # no torch line
    winner = candidate("sequential", 900, workers=4)
    alone = {s.tool for s in snippets(open_model(sharded_model), winner, (winner,))}
    assert alone == {"modelmon", "torch", "safetensors", "safetensors-read"}
    pipeline = {s.tool for s in snippets(open_model(diffusers_model), winner, (winner,))}
    assert pipeline == {"modelmon", "torch", "safetensors", "safetensors-read", "diffusers"}
    torch_line = apply_snippets(open_model(bf16_model), winner, (winner,))["torch"]
    assert "torch.from_numpy(array.view(f'u{array.itemsize}'))" in torch_line
    ast.parse(torch_line)
    streamed = candidate("sequential", 900, workers=4, discard=True)
    lines = snippets(open_model(sharded_model), streamed, (streamed,))
    assert [s.tool for s in lines][:2] == ["modelmon", "safetensors"]  # no tensors to wrap
    assert lines[0].aside.startswith("returns an empty dict: the config streams the model")
    # The torch line is offered where torch is not installed too, and says so.
    torch_aside = next(
        s for s in snippets(open_model(sharded_model), winner, (winner,)) if s.tool == "torch"
    ).aside
    assert torch_aside.endswith("; torch is not installed here")
    monkeypatch.setattr(safetensors_lines, "torch_installed", lambda: True)
    torch_aside = next(
        s for s in snippets(open_model(sharded_model), winner, (winner,)) if s.tool == "torch"
    ).aside
    assert "not installed" not in torch_aside


def test_every_gguf_line_is_exact():
    winner = candidate("mmap", 300, 310, 305)
    made = snippets(GGUF, winner, (winner,))  # type: ignore[arg-type]
    gguf = shlex.quote(f"{FOLDER}/m.gguf")
    load = f"modelmon.core.load({FOLDER + '/m.gguf'!r}, config='modelmon.toml')"
    assert {s.tool: s.text for s in made} == {
        "modelmon": f"import modelmon.core; tensors = {load}",
        "torch": "import modelmon.core, torch; tensors = "
        f"{{name: torch.from_numpy(array) for name, array in {load}.items()}}",
        "llama.cpp": f"llama-server -m {gguf}",
        "llama.cpp-no-mmap": f"llama-server -m {gguf} --no-mmap",
        "llama.cpp-direct-io": f"llama-server -m {gguf} --direct-io",
        "llama.cpp-mlock": f"llama-server -m {gguf} --mlock",
    }
    measured = {s.tool: s.measured_as for s in made}
    assert measured["llama.cpp"] == "mmap threads=1" and measured["llama.cpp-mlock"] is None
    # The pick is the mapped load: llama.cpp's default line does what it does.
    assert matching(made, winner) == "llama.cpp"


def test_a_gguf_pick_no_llama_cpp_line_does_names_llama_cpps_fastest_line():
    winner = candidate("pread", 1200, 1229, 1250, workers=4)
    mapped = candidate("mmap", 800, 812, 820)
    whole = candidate("sequential", 970, 983, 990, chunk=16 << 20)
    made = snippets(GGUF, winner, (winner, mapped, whole))  # type: ignore[arg-type]
    assert matching(made, winner) == "modelmon"
    evidence = {s.tool: s.evidence() for s in made}
    assert evidence["llama.cpp-no-mmap"] == (
        f"measured here as {whole.spec}: 983 MB/s; the fastest of llama.cpp's lines measured here"
    )
    assert evidence["llama.cpp"] == f"mmap, the default; measured here as {mapped.spec}: 812 MB/s"


def test_the_line_that_matches_the_pick_is_the_loaders_before_modelmons():
    winner = candidate("sequential", 900, 910, 905, workers=4, chunk=16 << 20)
    whole = candidate("sequential", 500, 505, 510, workers=1, chunk=16 << 20)
    made = snippets(SAFETENSORS, winner, (winner, whole))  # type: ignore[arg-type]
    assert matching(made, winner) == "modelmon"  # no loader's line reads as it does
    assert matching(made, whole) == "safetensors-read"
    assert matching(made, candidate("pread", 1, 2, 3)) is None


def test_a_sharded_model_names_each_file_for_a_python_call_and_its_folder_for_a_server(
    tmp_path: Path,
):
    files = [tmp_path / f"model-0000{i}-of-00002.safetensors" for i in (1, 2)]
    model = SimpleNamespace(
        path=str(tmp_path), files=[SimpleNamespace(path=str(f), remote=None) for f in files]
    )
    call = pasteable("safetensors.torch.load_file(PATH)  (mmap)", model)  # type: ignore[arg-type]
    assert call.code == "safetensors.torch.load_file(path)"
    assert call.aside == f"mmap; path: each of its 2 files in {tmp_path}"
    served = pasteable("RUNAI_X=1 vllm serve PATH --load-format runai_streamer", model)  # type: ignore[arg-type]
    assert (
        served.code
        == f"RUNAI_X=1 vllm serve {shlex.quote(str(tmp_path))} --load-format runai_streamer"
    )
    assert is_shell(served.code) and not is_shell(call.code)


@pytest.mark.parametrize("host_kind", ["aws", "minio-or-local"])
def test_a_bucket_gets_the_lines_of_the_loaders_that_stream_buckets(host_kind: str) -> None:
    url = "s3://models/llama/model.safetensors"
    where = SimpleNamespace(host_kind=host_kind, endpoint="http://10.0.0.5:9000")
    bucket = SimpleNamespace(
        format="safetensors",
        path=url,
        files=(SimpleNamespace(path=url, remote=where),),
        extents=(),
        kind="transformers",  # its prefix holds a config.json naming its architecture
    )
    winner = candidate("ranged", 900, 910, 905, threads=8, chunk=16 << 20)
    lines = apply_snippets(bucket, winner, (winner,), "m.toml")  # type: ignore[arg-type]
    size = f"RUNAI_STREAMER_CHUNK_BYTESIZE={16 << 20}"
    if host_kind != "aws":  # the streamer's own client, pointed at the endpoint, path-style
        size = (
            "AWS_ENDPOINT_URL=http://10.0.0.5:9000 RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING=0 "
            + size
        )
    load = f"modelmon.core.load({url!r}, config='m.toml')"
    assert lines == {
        "modelmon": f"import modelmon.core; tensors = {load}",
        "torch": "import modelmon.core, torch; tensors = "
        f"{{name: torch.from_numpy(array) for name, array in {load}.items()}}",
        # A server takes the prefix, as it takes a folder; the pick's connections and parts.
        "vllm-runai_streamer": f"{size} vllm serve s3://models/llama/ --load-format runai_streamer "
        "--model-loader-extra-config '{\"concurrency\": 8}'",
        "sglang": f"RUNAI_STREAMER_CONCURRENCY=8 {size} python -m sglang.launch_server "
        "--model-path s3://models/llama/ --load-format runai_streamer",
    }


def test_a_plain_download_pick_tells_a_streamer_the_fastest_concurrent_setting() -> None:
    """A streamer reads concurrently: the pick of one connection (a plain download) would set
    it to one; it is told the fastest concurrent setting measured, and its line says whose."""
    url = "s3://models/llama/model.safetensors"
    where = SimpleNamespace(host_kind="aws", endpoint="")
    bucket = SimpleNamespace(
        format="safetensors",
        path=url,
        files=(SimpleNamespace(path=url, remote=where),),
        extents=(),
        kind="transformers",
    )
    plain = candidate("ranged", 820, 815, threads=1, chunk=1 << 30)
    wide = candidate("ranged", 780, threads=10, chunk=256 << 20)
    made = {
        s.tool: s
        for s in snippets(bucket, plain, (plain, wide))  # type: ignore[arg-type]
    }
    vllm, sglang = made["vllm-runai_streamer"].text, made["sglang"].text
    assert '{"concurrency": 10}' in vllm and f"RUNAI_STREAMER_CHUNK_BYTESIZE={256 << 20}" in vllm
    assert sglang.startswith("RUNAI_STREAMER_CONCURRENCY=10 ")
    assert f"the fastest concurrent setting measured ({wide.spec})'s connections" in (
        made["vllm-runai_streamer"].evidence()
    )


def test_a_plain_download_pick_tells_a_streamer_the_setting_it_was_raced_against(
    moto_s3: SimpleNamespace,
) -> None:
    """A new user's walk on a loopback bucket: the answer kept the plain download (1,298
    MB/s), raced in pairs with 8 connections of 64 MiB (1,288 MB/s); vLLM's and SGLang's
    lines were told "the fastest concurrent setting measured (ranged threads=8
    chunk=256MiB)", one run the answer never raced. They are told the setting it was raced
    against, and [apply_evidence] says so."""
    from modelmon.core.measuring.judging import Duel, decide
    from modelmon.core.output.config import recommendation_document

    from .test_explain import record

    plain = candidate("ranged", 1290, 1298.4, 1310, 1285, threads=1, chunk=1 << 30)
    plain.role = "baseline"
    raced = candidate("ranged", 1280, 1288, 1295, threads=8, chunk=64 << 20)
    best, other, verdict, tie = decide(raced, plain, [0.99, 1.0, 0.985])
    assert best is plain and other is raced
    raced.verdict = verdict
    once = candidate("ranged", 1401.5, threads=8, chunk=256 << 20)
    duel = Duel(other=raced, verdict=verdict, tie=tie, pairs=3)
    model = open_model(f"s3://{BUCKET}/llama/")
    made = {s.tool: s for s in snippets(model, plain, (once, plain, raced), duel=duel)}
    vllm = made["vllm-runai_streamer"]
    assert f"RUNAI_STREAMER_CHUNK_BYTESIZE={64 << 20}" in vllm.text
    assert f"RUNAI_STREAMER_CHUNK_BYTESIZE={64 << 20}" in made["sglang"].text
    whose = f"the concurrent setting the pick was raced against ({raced.spec})'s connections"
    assert whose in vllm.evidence() and whose in made["sglang"].evidence()
    rec = record(model, winner=plain, ranked=(once, plain, raced), duel=duel)
    document = recommendation_document(rec, "m.toml")
    assert document["apply"]["vllm-runai_streamer"] == vllm.text
    assert whose in document["apply_evidence"]["vllm-runai_streamer"]
    assert once.spec not in document["apply_evidence"]["sglang"]


def test_a_kept_plain_download_tells_a_streamer_the_searchs_pick() -> None:
    """The answer keeps the plain download over the search's pick, weighed on their runs:
    a streamer is told the search's pick, named as the answer names it, not a faster
    setting's one run."""
    from modelmon.core.measuring.judging import Duel
    from modelmon.core.measuring.noise import BUCKET_NOISE

    url = "s3://models/llama/model.safetensors"
    where = SimpleNamespace(host_kind="aws", endpoint="")
    bucket = SimpleNamespace(
        format="safetensors",
        path=url,
        files=(SimpleNamespace(path=url, remote=where),),
        extents=(),
        kind="transformers",
    )
    plain = candidate("ranged", 650, threads=1, chunk=1 << 30)
    searched = candidate("ranged", 737, 642, 918, 700, threads=16, chunk=64 << 20)
    once = candidate("ranged", 990, threads=32, chunk=16 << 20)
    duel = Duel(other=searched, tie=True, noise=BUCKET_NOISE, kept=True)
    made = {s.tool: s for s in snippets(bucket, plain, (once, searched, plain), duel=duel)}  # type: ignore[arg-type]
    assert '{"concurrency": 16}' in made["vllm-runai_streamer"].text
    assert f"the search's pick ({searched.spec})'s connections" in made["sglang"].evidence()


SERVED_BY = (
    "No vLLM or SGLang line: they serve a folder or bucket prefix by its config.json, which "
    "names the model's architecture"
)


def test_a_bucket_model_gets_server_lines_only_where_its_prefix_is_one_they_serve(
    moto_s3: SimpleNamespace,
) -> None:
    """vLLM and SGLang read config.json beside the weights: their lines for a prefix that
    holds one naming an architecture; none for weights alone, or an object named alone
    (nothing listed beside it), each saying why in one line."""
    winner = candidate("ranged", 900, 910, 905, threads=8, chunk=16 << 20)
    served = open_model(f"s3://{BUCKET}/llama/")
    lines = apply_snippets(served, winner, (winner,))
    assert list(lines) == ["modelmon", "torch", "vllm-runai_streamer", "sglang"]
    _named_by_the_server_they_run(lines)
    assert (
        f"vllm serve s3://{BUCKET}/llama/ --load-format runai_streamer"
        in lines["vllm-runai_streamer"]
    )
    assert servers_left_out(served, lines) == ""
    alone = open_model(f"s3://{BUCKET}/single/")
    lines = apply_snippets(alone, winner, (winner,))
    assert list(lines) == ["modelmon", "torch"]
    assert servers_left_out(alone, lines) == (
        f"{SERVED_BY}, and s3://{BUCKET}/single/ has no config.json that names one."
    )
    named = open_model(f"s3://{BUCKET}/llama/model.safetensors")
    lines = apply_snippets(named, winner, (winner,))
    assert list(lines) == ["modelmon", "torch"]
    assert servers_left_out(named, lines) == (
        f"{SERVED_BY}, and an object named alone has nothing listed beside it: name its "
        f"prefix, s3://{BUCKET}/llama/, to have its config.json looked for."
    )


def test_weights_alone_in_a_folder_say_why_no_server_line(
    sharded_model: Path, transformers_model: Path, diffusers_model: Path
) -> None:
    assert servers_left_out(open_model(sharded_model)) == (
        f"{SERVED_BY}, and {sharded_model.parent} has no config.json that names one."
    )
    assert servers_left_out(open_model(transformers_model)) == ""
    assert servers_left_out(open_model(diffusers_model)).startswith(
        "No vLLM or SGLang line: a diffusers model"
    )
    # A loader's own server line (the user's engine) is a line: nothing is left out.
    assert servers_left_out(open_model(sharded_model), ["vllm-eager"]) == ""


def test_a_shard_named_alone_has_no_server_line_and_says_why(tmp_path: Path) -> None:
    """Walk 20: `recommend model-00001-of-00002.safetensors` offered "vllm serve FOLDER",
    which serves both shards (2.29 GB), beside a figure of the one shard measured (1.14
    GB). A shard named alone has no server line; [apply_left_out] says why. Its folder or
    index has them, as before."""
    from modelmon.core import write_safetensors_model

    index = write_safetensors_model(
        tmp_path / "served", layers=2, hidden=64, vocab=256, shards=2, transformers_config=True
    )
    shard = open_model(sorted(index.parent.glob("*.safetensors"))[0])
    winner = candidate("sequential", 900, workers=4)
    tools = [s.tool for s in snippets(shard, winner, (winner,))]
    assert not [t for t in tools if t.startswith(("vllm", "sglang"))], tools
    why = servers_left_out(shard, tools)
    assert why.startswith(f"No vLLM or SGLang line: they serve the whole folder, {index.parent}")
    assert "whose 1 other weight file this run did not read" in why
    whole = open_model(index)
    tools = [s.tool for s in snippets(whole, winner, (winner,))]
    assert any(t.startswith("vllm") for t in tools) and servers_left_out(whole, tools) == ""
