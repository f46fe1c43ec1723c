"""The recommendation's search space: modelmon's configurations most promising first, the
other loaders installed here that load the model (``loaders.registry``), and the device
readahead values tried on the best configuration that reads through the page cache. Their
order in the screening is ``search.screening_order``'s.
"""

from __future__ import annotations

from collections.abc import Callable

from modelmon.core.configuration import ProgramConfig
from modelmon.core.limits import SEARCH_WIDTH
from modelmon.core.loaders.registry import ENGINES
from modelmon.core.measuring.bounds import readers_of
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceiling_records import Ceilings
from modelmon.core.model.records import Model
from modelmon.core.options import LoadOptions, MiB
from modelmon.core.system import readahead

# Device readahead tried for the champion's configuration, where modelmon may set it: the
# kernel's default, the common "raise it" advice, and two steps past it.
READAHEAD_KIB = (128, 1024, 4096, 16384)


def candidates(
    model: Model, parallel: int, lead: tuple[int, bool] | None = None
) -> list[Candidate]:
    """The search space, most promising first (the budget trims from the end). ``lead``: the
    readers of the storage bound's best plain setting and whether they read O_DIRECT: the
    configuration that reads as they do enters first (a sweep that found 1 reader, or
    O_DIRECT, fastest here found what this storage likes; on FUSE a 120 s budget screens
    little more than the first two).

    Each way of loading comes before variants of one: parallel reads into arrays, then no
    copy at all (tensors as views of the page cache: half the memory taken, and no copy on
    CPUs that a FUSE daemon needs too), then other ways of reading into arrays. On slow
    storage a budget screens few candidates (120 s on FUSE, ~10 s a run of 2.5 GB: about
    four), and a way of loading placed behind variants of another is never reached though it
    may be the fastest there.

    Options are what a loader would apply (cache "keep"); every run is made cold.
    """
    base = LoadOptions(threads=1)  # each candidate names its own threads
    grid = [
        Candidate.of("sequential", base.with_(workers=parallel, chunk=16 * MiB)),
        Candidate.of("library", base, role="baseline"),
        Candidate.of("mmap-shared-fd", base.with_(workers=parallel), role="failure mode"),
        Candidate.of("mmap-view", base.with_(workers=parallel)),
        Candidate.of("pread", base.with_(workers=parallel)),
        Candidate.of("mmap", base.with_(workers=parallel)),
        Candidate.of("sequential", base.with_(workers=1, chunk=16 * MiB)),
        Candidate.of("direct", base.with_(workers=parallel, chunk=16 * MiB)),
        Candidate.of("sequential", base.with_(workers=parallel, threads=2, chunk=64 * MiB)),
        Candidate.of(
            "sequential", base.with_(workers=parallel, chunk=4 * MiB, fadvise="sequential")
        ),
        Candidate.of("pread", base.with_(workers=1, threads=4)),
        Candidate.of("sequential", base.with_(workers=SEARCH_WIDTH * parallel, chunk=16 * MiB)),
        Candidate.of("mmap", base.with_(workers=1, madvise="sequential")),
    ]
    after_direct = next(i for i, c in enumerate(grid) if c.strategy == "direct") + 1
    grid.insert(after_direct, Candidate.of("warmup", base.with_(workers=parallel)))
    first = _reading_as(grid, lead)
    return grid if first is None else [first, *(c for c in grid if c is not first)]


def storage_lead(ceilings: Ceilings) -> tuple[int, bool] | None:
    """The readers of the storage bound's best plain setting, and whether they read
    O_DIRECT (None: no sweep measured)."""
    storage = ceilings.get("storage")
    setting = storage.best_setting if storage is not None else None
    return readers_of(setting) if setting is not None else None


def _reading_as(grid: list[Candidate], lead: tuple[int, bool] | None) -> Candidate | None:
    """The candidate of ``grid`` that reads as plain readers ``lead`` do: O_DIRECT ones as
    ``direct`` does, buffered ones as ``sequential`` with as many workers of one thread."""
    if lead is None:
        return None
    readers, direct = lead
    for candidate in grid:
        options = candidate.options
        if direct and candidate.strategy == "direct" and options.workers == readers:
            return candidate
        if (
            not direct
            and candidate.strategy == "sequential"
            and options.workers == readers
            and options.threads == 1
            and options.fadvise == "none"
        ):
            return candidate
    return None


NUMPY_TYPES = {"F64", "F32", "F16", "I64", "I32", "I16", "I8", "U8", "BOOL"}


def peer_candidates(model: Model, parallel: int) -> tuple[list[Candidate], list[str]]:
    """The other loaders the search races (``Engine.searched``), installed here and loading
    this model's format, with the settings a user would set; a note for each absent one."""
    searched = [e for e in ENGINES.values() if e.searched and model.format in e.formats]
    if not searched:
        return [], []
    found, absent = [], []
    odd = sorted({e.dtype for e in model.extents} - NUMPY_TYPES)
    remote = any(file.remote is not None for file in model.files)
    for engine in searched:
        # A bucket: only a loader that streams one itself (Run:ai's S3 backend) races.
        why = engine.streams_buckets() if remote else engine.unavailable()
        if why is None and engine.name == "safetensors" and odd:  # numpy has no such types
            why = f"safetensors (numpy) was not measured: it cannot load {', '.join(odd)} tensors"
        if why is not None:
            absent.append(why)
            continue
        assert engine.searched is not None
        for settings in engine.searched(parallel):
            program = ProgramConfig("engine", engine=engine.name).with_knobs(settings)
            found.append(Candidate(program, role="peer"))
    return found, absent


def readahead_variants(paths: list[str]) -> Callable[[list[Candidate]], list[Candidate]]:
    """Of candidates fastest first: the best of modelmon's that reads through the page cache
    (O_DIRECT bypasses readahead), with each of ``READAHEAD_KIB`` set on the device but the
    value it has now (that one ran already)."""

    def variants(contenders: list[Candidate]) -> list[Candidate]:
        best = next(
            (
                c.own
                for c in contenders
                if c.own is not None and c.strategy != "direct" and c.readahead is None
            ),
            None,
        )
        if best is None:
            return []
        current = {knob.read_kb() for knob in readahead.knobs_of(paths)}
        return [
            Candidate(best.with_options(readahead=kb)) for kb in READAHEAD_KIB if current != {kb}
        ]

    return variants
