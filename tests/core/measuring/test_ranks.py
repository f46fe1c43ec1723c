"""Ranks on one node: N loaders from one barrier, replicas or tensor-parallel slices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from modelmon.core.errors import OptionsError
from modelmon.core.loading.messages import ReadBatch, WorkerReady
from modelmon.core.loading.runner import LoadRun, run_load
from modelmon.core.measuring.ranks import RanksRun, run_ranks
from modelmon.core.measuring.ranks_checks import check_ranks
from modelmon.core.measuring.ranks_records import find_straggler
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.core.output.json import dumps
from modelmon.core.output.text import render_ranks
from modelmon.core.system import cache

from ..system.test_memory_cgroup import REAL


def strict_json(data: object) -> object:
    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(dumps(data), parse_constant=refuse)


class Recorder:
    """Every worker message of every rank, in the order the parent saw them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[object] = []

    def __call__(self, message: object) -> None:
        with self.lock:
            self.messages.append(message)


def test_whole_ranks_each_load_the_whole_model_from_one_barrier(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = open_model(sharded_model)
    prepared: list[object] = []
    real_prepare = cache.prepare

    def counting_prepare(*args: object, **kwargs: object) -> cache.CacheState:
        prepared.append(args)
        return real_prepare(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cache, "prepare", counting_prepare)
    recorder = Recorder()
    options = LoadOptions(workers=2, cache="cold", verify=True)
    result = run_ranks(model, "pread", options, ranks=3, on_message=recorder)

    assert result.status == "ok", result.error
    assert len(prepared) == 1  # the cache is put cold and measured once for all ranks
    assert result.cache.requested == "cold" and result.cache.method != "none"
    single = run_load(model, "pread", LoadOptions(workers=1, verify=True))
    assert [r.rank for r in result.ranks] == [0, 1, 2]
    for rank in result.ranks:
        assert rank.result is not None
        assert rank.result.bytes == rank.read_bytes == model.total_bytes
        assert rank.result.checksum == single.checksum  # every byte, right, in every rank
        assert rank.result.cache.resident_before == result.cache.resident_before
        assert len(rank.result.workers) == 2
        assert rank.kept_bytes < model.total_bytes  # it narrows to its part
    assert result.read_bytes == 3 * model.total_bytes
    # The barrier: no rank read a byte before the workers of every rank were ready.
    kinds = [type(m) for m in recorder.messages]
    assert kinds.count(WorkerReady) == 6
    last_ready = max(i for i, kind in enumerate(kinds) if kind is WorkerReady)
    first_read = min(i for i, kind in enumerate(kinds) if kind is ReadBatch)
    assert last_ready < first_read
    # The server has its weights when its slowest rank has: the run's time is that rank's end.
    assert min(r.start for r in result.ranks) == 0.0
    assert result.seconds == max(r.end for r in result.ranks)
    assert result.mbps == pytest.approx(model.total_bytes / result.seconds / 1e6)
    straggler = result.straggler
    assert straggler is not None
    slowest = max(result.ranks, key=lambda r: r.seconds)
    assert straggler.who == f"rank {slowest.rank}" and straggler.ratio >= 1.0
    assert result.node is not None and result.node.peak_bytes > 0
    document = strict_json(result.to_dict())
    assert isinstance(document, dict) and document["mode"] == "whole"
    assert "3 ranks, whole" in render_ranks(result)


def test_slice_ranks_each_read_their_tensor_parallel_part(sharded_model: Path) -> None:
    model = open_model(sharded_model)
    options = LoadOptions(workers=2, cache="cold", verify=True)
    result = run_ranks(model, "sequential", options, ranks=2, mode="slice")

    assert result.status == "ok", result.error
    whole = {e.name for e in model.extents}
    replicated = sum(e.length for e in model.extents if len(e.array_shape) < 2)
    for rank in result.ranks:
        assert rank.result is not None and rank.result.status == "ok"
        assert set(rank.result.tensor_checksums) == whole  # a part of every tensor
        assert rank.tensors == len(model.extents)
    # The parts of every tensor make it whole; norms are whole on every rank.
    assert sum(r.kept_bytes for r in result.ranks) == model.total_bytes + replicated
    assert result.read_bytes < 2 * model.total_bytes
    document = strict_json(result.to_dict())
    assert isinstance(document, dict) and document["mode"] == "slice" and document["split"]
    text = render_ranks(result)
    assert "2 ranks, slice" in text
    assert "between the ranks at" in text and "on every rank" not in text  # each its part
    for rank in result.ranks:  # what a rank keeps is memory (binary), what it reads data
        row = next(line for line in text.splitlines() if line.split()[:2] == [str(rank.rank), "ok"])
        assert row.split()[3] == "MB" and row.split()[5] == "MiB", row


def test_one_reader_ranks_map_one_shared_copy(sharded_model: Path) -> None:
    model = open_model(sharded_model)
    options = LoadOptions(workers=2, cache="cold", verify=True)
    result = run_ranks(model, "sequential", options, ranks=3, mode="one-reader")

    assert result.status == "ok", result.error
    reader = result.reader
    assert reader is not None and reader.status == "ok" and reader.bytes == model.total_bytes
    single = run_load(model, "sequential", LoadOptions(verify=True))
    assert reader.checksum == single.checksum
    assert result.read_bytes == model.total_bytes  # one read for the node
    for rank in result.ranks:
        assert rank.status == "ok" and rank.read_bytes == rank.kept_bytes == 0
        assert rank.seconds >= reader.seconds  # it had its weights once the copy was whole
    assert result.seconds == max(r.end for r in result.ranks)
    assert not [n for n in os.listdir("/dev/shm") if "modelmon" in n]  # nothing named
    assert "reader: ok" in render_ranks(result)


def test_ranks_that_cannot_be_run_as_asked_are_refused(bf16_model: Path, tmp_path: Path) -> None:
    # Its widest weights split 128 ways (the MLP's 128 rows, or columns of down_proj).
    folder = tmp_path / "tiny"
    tiny = open_model(
        write_safetensors_model(folder, layers=1, hidden=32, intermediate=128, vocab=16)
    )
    with pytest.raises(OptionsError, match="no weight of the model splits 200 ways"):
        check_ranks(tiny, "sequential", 200, "slice")
    with pytest.raises(OptionsError, match="no weight of the model splits 129 ways"):
        RanksRun(tiny, ranks=129, mode="slice")
    # Some weights split, others (the 16-row vocabulary) are held whole by every rank.
    RanksRun(tiny, ranks=64, mode="slice")
    model = open_model(bf16_model)
    with pytest.raises(OptionsError, match="ranks"):
        RanksRun(model, ranks=0)
    with pytest.raises(OptionsError, match="mode"):
        RanksRun(model, ranks=2, mode="broadcast")  # type: ignore[arg-type]
    with pytest.raises(OptionsError, match="reads into memory"):
        RanksRun(model, "mmap-view", ranks=2, mode="one-reader")
    with pytest.raises(OptionsError, match="discard"):
        RanksRun(model, ranks=2, mode="one-reader", options=LoadOptions(discard=True))


def test_a_rank_that_fails_before_the_barrier_releases_the_others(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    path = write_safetensors_model(folder, layers=2, hidden=64, vocab=128, dtype="F16", seed=4)
    ranks = RanksRun(path, "pread", LoadOptions(cache="cold"), ranks=3)
    # Planned, then changed on disk: each rank's workers refuse before they are ready.
    with open(next(folder.glob("*.safetensors")), "ab") as handle:
        handle.write(b"\0" * 4096)
    result = ranks.run()  # returns: no rank waits forever at the barrier

    assert result.status == "failed"
    assert result.error is not None and result.error.startswith("rank ")
    assert "worker 0 failed" in result.error
    assert {r.status for r in result.ranks} <= {"failed", "cancelled"}
    assert result.cache.method == "none"  # never reached the cache measurement


def test_a_failed_rank_stops_the_others_but_not_the_callers_run(tmp_path: Path) -> None:
    """The ranks stop each other when one fails; the caller's cancel (an A/B's, a search's,
    the user's Ctrl+C) stays unset: what ended the run was a failure, not a stop asked."""
    folder = tmp_path / "model"
    path = write_safetensors_model(folder, layers=2, hidden=64, vocab=128, dtype="F16", seed=4)
    asked = threading.Event()
    ranks = RanksRun(path, "pread", LoadOptions(cache="cold"), ranks=2, cancel=asked)
    with open(next(folder.glob("*.safetensors")), "ab") as handle:
        handle.write(b"\0" * 4096)
    result = ranks.run()
    assert result.status == "failed" and not asked.is_set()


# A caller's script: it notes each process that runs its top level. Spawn children that
# re-ran it (a server's entry point, Ray's worker, an app importing Qt) would each note one
# and hold all it imports, counted in the node's memory as the ranks'.
CALLER = """
import os, sys
with open(sys.argv[2], "a") as notes:
    notes.write(f"{os.getpid()}\\n")
if __name__ == "__main__":
    from modelmon.core import RanksRun
    result = RanksRun(sys.argv[1], "sequential", ranks=2, mode="one-reader").run()
    assert result.status == "ok", result.error
"""


def test_one_reader_ranks_start_without_the_callers_main_module(
    sharded_model: Path, tmp_path: Path
) -> None:
    script, notes = tmp_path / "serve.py", tmp_path / "notes"
    script.write_text(CALLER)
    done = subprocess.run(
        [sys.executable, str(script), str(sharded_model), str(notes)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert len(notes.read_text().split()) == 1  # the caller's own run of it, no rank's


def test_cancel_before_start_cancels_every_rank(sharded_model: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    result = run_ranks(sharded_model, "pread", LoadOptions(), ranks=2, cancel=cancel)
    assert result.status == "cancelled"
    assert all(r.status == "cancelled" for r in result.ranks)
    assert result.read_bytes == 0


def test_find_straggler_is_the_slowest_against_the_median() -> None:
    assert find_straggler([]) is None
    straggler = find_straggler([("a", 1.0), ("b", 3.0), ("c", 2.0)])
    assert straggler is not None
    assert (straggler.who, straggler.seconds, straggler.median_seconds) == ("b", 3.0, 2.0)
    assert straggler.ratio == 1.5


def test_a_start_gate_hears_the_verified_cache_once_every_worker_is_ready_and_may_refuse(
    sharded_model: Path,
) -> None:
    seen: list[tuple[int, int, bool]] = []

    def gate(state: cache.CacheState) -> bool:
        seen.append((len(run.ready), run.reads.count, state.cold))
        return False

    run = LoadRun(sharded_model, "pread", LoadOptions(workers=3, cache="cold"), start_gate=gate)
    result = run.run()
    assert seen == [(3, 0, True)]  # all three workers ready, not one read yet, verified cold
    assert result.status == "cancelled" and result.bytes == 0 and run.t0_ns == 0
    assert result.cache.cold and result.cache.method != "none"


def test_a_bert_slices_with_its_buffers_whole_in_every_rank(tmp_path: Path) -> None:
    """BERT's position_ids (I64 [1, 512]) is a buffer no engine shards: every slice rank
    holds it whole, and the weights are split."""
    import numpy as np
    from safetensors.numpy import save_file

    path = tmp_path / "bert.safetensors"
    save_file(
        {
            "embeddings.position_ids": np.arange(512, dtype=np.int64).reshape(1, 512),
            "embeddings.word_embeddings.weight": np.ones((1024, 64), np.float16),
            "encoder.layer.0.attention.self.query.weight": np.ones((64, 64), np.float16),
        },
        str(path),
    )
    result = run_ranks(path, "sequential", LoadOptions(cache="keep"), ranks=2, mode="slice")
    assert result.status == "ok", result.error
    for rank in result.ranks:
        assert rank.result is not None and rank.result.status == "ok"


@REAL
def test_ranks_that_thrash_under_their_limit_are_stopped(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranks re-reading their model after reclaim would go on for minutes, timing the limit:
    once the node's cgroup counts the model read again (here said so at once), they stop,
    and the run fails saying why."""
    from modelmon.core.measuring import ranks
    from modelmon.core.system.memory_cgroup import MemoryCgroup

    monkeypatch.setattr(ranks, "THRASH_LOOK_S", 0.01)
    monkeypatch.setattr(MemoryCgroup, "reread_bytes", lambda self: 1 << 40)
    result = RanksRun(
        sharded_model, "pread", LoadOptions(cache="cold"), ranks=2, memory_limit=2 << 30
    ).run()
    assert result.status == "failed"
    assert (result.error or "").startswith("thrashing under the 2.0 GiB limit: the ranks read")
    assert "stopped there" in (result.error or "")
