"""A model file truncated or deleted while a load runs, for every strategy: the run fails with
one line that says what happened, and nothing is reported as measured that was not.

The faults land at a state, not a time: truncation once every worker has planned its reads
and opened the files (WorkerReady from all), deletion once every byte was read (WorkerDone
from all), so the residency after the load is what cannot be measured.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from modelmon.core.loading.messages import WorkerDone, WorkerReady
from modelmon.core.loading.runner import LoadRun
from modelmon.core.loading.strategies import FILE_STRATEGIES
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.core.output.json import dumps
from modelmon.core.output.text import render_result

WORKERS = 2
OPTIONS = LoadOptions(workers=WORKERS, threads=2, chunk=64 << 10, cache="cold", discard=True)


def _model(tmp_path: Path) -> Path:
    return write_safetensors_model(tmp_path, layers=2, hidden=512, vocab=2048)


@pytest.mark.parametrize("strategy", sorted(FILE_STRATEGIES))
def test_truncated_mid_load_fails_with_the_truncation(tmp_path: Path, strategy: str) -> None:
    path = _model(tmp_path)
    ready: set[int] = set()

    def on_message(message: object) -> None:
        if isinstance(message, WorkerReady):
            ready.add(message.worker)
            if len(ready) == WORKERS:
                os.truncate(path, 4096)

    result = LoadRun(path, strategy, OPTIONS, on_message=on_message).run()
    assert len(ready) == WORKERS
    assert result.status == "failed", strategy
    error = result.error or ""
    assert len(error.splitlines()) == 1 and "BufferError" not in error, error
    # The worker names the file it finds shorter; a mapped page gone kills it by SIGBUS.
    assert f"{path} was truncated during the load" in error or "SIGBUS" in error, error
    assert "truncated" in error


@pytest.mark.parametrize("strategy", sorted(FILE_STRATEGIES))
def test_deleted_after_every_byte_was_read_is_not_measured(tmp_path: Path, strategy: str) -> None:
    path = _model(tmp_path)
    done: set[int] = set()

    def on_message(message: object) -> None:
        if isinstance(message, WorkerDone):
            done.add(message.worker)
            if len(done) == WORKERS:
                path.unlink()

    result = LoadRun(path, strategy, OPTIONS, on_message=on_message).run()
    assert len(done) == WORKERS
    assert result.status == "failed"
    assert result.error is not None and "deleted or replaced during the load" in result.error
    assert str(path) in result.error
    assert math.isnan(result.cache.resident_after)
    document = json.loads(dumps(result.to_dict()))  # strict JSON: no NaN
    assert document["cache"]["resident_after"] is None
    assert "not measured after" in render_result(result) and "nan" not in render_result(result)
