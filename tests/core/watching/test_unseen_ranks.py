"""Ranks the watch's looks never catch holding the model: each opens its shards, reads them
whole and closes them between two looks at its descriptors, then reads a file that is not the
model. The kernel names every process that opened or read a model file (fanotify): each rank
is a row with the model's bytes it read, never more, and its reading of the model is never
"other files"; a process that read only the headers is no rank."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from modelmon.core import Watch, write_safetensors_model
from modelmon.core.system.file_access import FAN_CLOSE_NOWRITE, FAN_OPEN, FileAccess
from modelmon.core.watching.accessors import Accessors

from .test_cold_start import running_with

RANKS = 12
OTHER_BYTES = 24 << 20
# argv: the model's folder, a file that is not the model, a marker of the test; then "rank"
# or "headers" for the launcher's children.
LAUNCHER = """
import json, os, struct, subprocess, sys, time
folder, other = sys.argv[1], sys.argv[2]
shards = sorted(os.path.join(folder, p) for p in os.listdir(folder) if p.endswith(".safetensors"))
if sys.argv[-1] == "rank":
    for shard in shards:
        with open(shard, "rb", buffering=0) as weights:
            while weights.read(8 << 20):
                pass
    with open(other, "rb", buffering=0) as data:
        while data.read(8 << 20):
            pass
    time.sleep(0.3)
    sys.exit(0)
if sys.argv[-1] == "headers":
    for shard in shards:
        with open(shard, "rb", buffering=0) as weights:
            (length,) = struct.unpack("<Q", weights.read(8))
            json.loads(weights.read(length))
    time.sleep(0.3)
    sys.exit(0)
children = [
    subprocess.Popen(
        [sys.executable, sys.argv[0], *sys.argv[1:], "rank"],
        env={**os.environ, "RANK": str(rank), "WORLD_SIZE": "RANKS"},
    )
    for rank in range(RANKS)
]
children.append(subprocess.Popen([sys.executable, sys.argv[0], *sys.argv[1:], "headers"]))
sys.exit(max(child.wait() for child in children))
""".replace("RANKS", str(RANKS))

needs_fanotify = pytest.mark.skipif(
    FileAccess.open() is None, reason="fanotify is refused here (it needs CAP_SYS_ADMIN)"
)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two shards of 5-6 MB: read whole in a few milliseconds from the page cache."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("unseen"), layers=2, hidden=512, vocab=4096, shards=2, seed=29
    )


def model_bytes(index: Path) -> int:
    return sum(p.stat().st_size for p in index.parent.glob("*.safetensors"))


@needs_fanotify
def test_the_kernel_names_each_process_that_read_a_marked_file(model: Path, tmp_path: Path) -> None:
    access = FileAccess.open()
    assert access is not None
    try:
        shards = sorted(model.parent.glob("*.safetensors"))
        assert all(access.mark(str(shard), index) for index, shard in enumerate(shards))
        reader = subprocess.run(
            [sys.executable, "-c", "import sys; open(sys.argv[1], 'rb').read()", str(shards[1])],
            check=True,
        )
        assert reader.returncode == 0
        seen = access.take()
        # Only the second shard, opened and closed by the reader (its pid is gone: the test's
        # own pid is not among them, as it opened nothing since the marks).
        assert list(seen.values()) == [{1: FAN_OPEN | FAN_CLOSE_NOWRITE}], seen
        assert access.take() == {}
    finally:
        access.close()


@needs_fanotify
def test_ranks_that_read_between_two_looks_are_each_a_row_with_the_model_they_read(
    model: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.dat"
    other.write_bytes(b"\1" * OTHER_BYTES)
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    marker = str(tmp_path / "marker")
    result = Watch(
        [sys.executable, str(launcher), str(model.parent), str(other), marker],
        model=str(model),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).run()
    assert result.exit_code == 0
    cold = result.cold_start
    assert cold is not None
    size = model_bytes(model)
    assert sorted(rank.rank for rank in cold.ranks) == list(range(RANKS)), cold.ranks
    assert {rank.rank_from for rank in cold.ranks} == {"RANK"}
    for rank in cold.ranks:
        assert 0.99 * size <= rank.model_bytes <= size, (rank, size)
    # The other file's bytes are other files' reading; the model's re-reads are not (they
    # were: 12 more reads of the model). Some of the other file's may go unseen: what a rank
    # read after the last tick that saw it reaches its launcher's counters when it is reaped,
    # and the launcher's last reading after its own last tick.
    other_read = sum(phase.other_read_bytes for phase in cold.phases)
    assert RANKS * OTHER_BYTES / 2 <= other_read <= RANKS * (OTHER_BYTES + size // 2), other_read
    assert not running_with(marker), "a rank outlived the watch"


class Events:
    """The kernel's events, as a FileAccess gives them, one batch a tick."""

    def __init__(self, *batches: dict[int, dict[int, int]]) -> None:
        self.batches = list(batches)

    def take(self) -> dict[int, dict[int, int]]:
        return self.batches.pop(0) if self.batches else {}


def test_a_process_has_a_file_open_from_its_open_to_its_close() -> None:
    """Between the two, ticks with no event of it count it (it reads what it opened); after
    the close it is no longer at the model (its reading then is of other files)."""
    accessors = Accessors()
    accessors.access = Events(  # type: ignore[assignment]
        {7: {0: FAN_OPEN}, 8: {1: FAN_OPEN | FAN_CLOSE_NOWRITE}, 99: {0: FAN_OPEN}},
        {},
        {7: {0: FAN_CLOSE_NOWRITE}},
        {},
    )
    members = {7, 8}
    # 99 is no member (yet): held over a few ticks, then dropped.
    assert [accessors.take(members) for _ in range(4)] == [
        {7: {0}, 8: {1}},
        {7: {0}},
        {7: {0}},
        {},
    ]
