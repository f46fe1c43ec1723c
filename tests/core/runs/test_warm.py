"""The uncounted run before a loader's rounds: a failure is said, a run that only could not
be timed (its model cached already) is none."""

from __future__ import annotations

from dataclasses import replace

from modelmon.core.runs.verdict import UNTIMED
from modelmon.core.runs.warm import warm_failure

from ..measuring.records import run


def test_a_warm_run_that_only_could_not_be_timed_did_not_fail() -> None:
    done = run(500.0)
    assert warm_failure(done) is None
    cached = replace(
        done, status="failed", error=f"{UNTIMED} (the model was already in the page cache)"
    )
    assert warm_failure(cached) is None
    crashed = replace(done, status="failed", error="exit code 1; its last error line: boom")
    assert warm_failure(crashed) == "exit code 1; its last error line: boom"
