"""``Strategy.maps_file`` says what a load does: the model's files are mapped into the
process while a strategy that says so loads, and never while another one does (the
recommendation prefers planned reads on that, and the bench explains peak RSS with it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelmon.core.loading.inproc import load_in_process
from modelmon.core.loading.strategies import FILE_STRATEGIES
from modelmon.core.model.formats import open_model
from modelmon.core.options import LoadOptions


class MapsWatch:
    """A stop flag that is never set; each time a reader polls it, it looks at
    /proc/self/maps for the model's files."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = [str(Path(p).resolve()) for p in paths]
        self.polls = 0
        self.mapped = False

    def is_set(self) -> bool:
        self.polls += 1
        with open("/proc/self/maps") as maps:
            text = maps.read()
        self.mapped = self.mapped or any(path in text for path in self.paths)
        return False


@pytest.mark.parametrize("strategy", sorted(FILE_STRATEGIES))
def test_a_strategy_maps_the_file_exactly_when_it_says_so(
    strategy: str, sharded_model: Path
) -> None:
    model = open_model(sharded_model)
    watch = MapsWatch([f.path for f in model.files])
    options = LoadOptions(threads=2, chunk=1 << 20)
    load_in_process(model, strategy, options, stop=watch)
    assert watch.polls > 0
    assert watch.mapped == FILE_STRATEGIES[strategy].maps_file, watch.mapped
