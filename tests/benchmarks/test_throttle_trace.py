"""The block-layer trace's reading: only the model's sectors, only between a run's marks, each
run's bytes over the span of its completions and its busiest 100 ms."""

from __future__ import annotations

from benchmarks.throttle_trace import delivered

SECTORS = [(1000, 2000)]


def _complete(stamp: float, sector: int, count: int, disk: str = "254,0") -> str:
    return (
        f"  kworker/0:1-12 [000] d.h1. {stamp:.6f}: block_rq_complete: {disk} RA () "
        f"{sector} + {count} be,0,4 [0]"
    )


def _mark(stamp: float, text: str) -> str:
    return f"  python-7 [001] ..... {stamp:.6f}: tracing_mark_write: {text}"


def test_a_runs_figure_is_its_own_completions_of_the_model_between_its_marks() -> None:
    trace = "\n".join(
        [
            _complete(0.5, 1000, 8),  # before any mark: not a run's
            _mark(1.0, "BEGIN plain 0"),
            _complete(1.00, 1000, 2048),  # 1 MiB
            _complete(1.05, 3000, 2048),  # another file's sectors
            _complete(1.06, 1150, 2048, disk="8,0"),  # another disk's
            _complete(1.08, 1100, 2048),
            _complete(1.50, 1200, 2048),
            _mark(1.6, "END plain 0"),
            _complete(1.7, 1300, 2048),  # between runs
            _mark(2.0, "BEGIN library 0"),
            _complete(2.1, 1400, 4096),
            _complete(2.3, 1500, 4096),
            _mark(2.4, "END library 0"),
            _mark(3.0, "BEGIN plain 1"),
            _mark(3.1, "END plain 1"),  # nothing of the model completed: zeros, not dropped
        ]
    )
    runs = delivered(trace, "254,0", SECTORS)
    assert [label for label, *_ in runs] == ["plain 0", "library 0", "plain 1"]
    assert runs[2] == ("plain 1", 0.0, 0.0, 0.0)
    _, total, span, most = runs[0]
    assert total == 3 * 2048 * 512 / 1e6 and abs(span - 0.5) < 1e-9
    assert most == 2 * 2048 * 512 / 1e6  # the completions at 1.00 and 1.08 s
    _, total, span, most = runs[1]
    assert total == 2 * 4096 * 512 / 1e6 and abs(span - 0.2) < 1e-9
    assert most == 4096 * 512 / 1e6
