"""Small frozen records: the model plan, and everything that crosses a process boundary.

Tensor bytes never appear here; only names, offsets, counts and timings.
"""

from __future__ import annotations

import gc
import operator
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.local_files import files_read_to_reach

# What a checkpoint is for, as the loaders that serve it see it (``model.kind``).
Kind = Literal["transformers", "diffusers", "gguf", "weights"]


class TensorExtent(NamedTuple):
    """Where one tensor's bytes live: ``length`` bytes at absolute ``offset`` of ``file``.

    A named tuple, not a dataclass: a header may hold a million tensors, and a tuple is made
    three times faster and, holding only strings, numbers and tuples of numbers, is soon
    left alone by the cyclic garbage collector.
    """

    name: str
    file: str
    offset: int
    length: int
    dtype: str  # the format's own type name: "F16", "BF16", "Q8_0", "Q4_K"...
    shape: tuple[int, ...]  # the format's own shape (GGUF: ne0 first)
    block: str  # "model.layers.3", "blk.3", "embeddings", "head", "other"
    array_dtype: str  # numpy dtype string of the loaded array ("<f2", "|u1")
    array_shape: tuple[int, ...]  # numpy shape of the loaded array

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(frozen=True, slots=True)
class ModelFile:
    path: str  # a path, or an object's URL (s3://bucket/key, https://host/path)
    size: int
    # Where an object lives and what it was when the model was opened (its ETag, which every
    # later read must match); None for a file.
    remote: ObjectFacts | None = None


@dataclass(frozen=True, slots=True)
class Model:
    """A parsed model: its files and the extents of all its tensors (file order, then offset)."""

    path: str  # what the user named: a file, an index, or a directory
    format: str  # "safetensors" | "gguf"
    files: tuple[ModelFile, ...]
    extents: tuple[TensorExtent, ...]
    metadata: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    # What the objects under a bucket prefix say the model is, found when it was opened
    # (``model.kind``); None: nothing was listed beside the weights (a file's folder is
    # looked at when asked, an object named alone has nothing listed beside it).
    kind: Kind | None = None
    # Summed once: a million-tensor model is asked for it by every layer of a load.
    total_bytes: int = field(init=False, repr=False, hash=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total_bytes", sum(map(_LENGTH, self.extents)))

    @property
    def file_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def paths(self) -> tuple[str, ...]:
        """Every file a run of this model reads: the path it was opened by (an index...), then
        its files, then for objects the local files their client reads (credentials...).
        What modelmon writes must be none of them (``system.outputs``)."""
        storages = [f.remote.storage for f in self.files if f.remote is not None]
        return (self.path, *(f.path for f in self.files), *files_read_to_reach(storages))

    def blocks(self) -> list[str]:
        """Block names in load order (first appearance by file and offset)."""
        return list(dict.fromkeys(map(_BLOCK, self.extents)))


_LENGTH, _BLOCK = operator.attrgetter("length"), operator.attrgetter("block")


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off Python's cyclic garbage collector while many records are made at once.

    Parsing a 100k-tensor header makes ~500k containers (JSON objects and lists, extents,
    shapes), planning its load ~200k (pieces, reads), and all of them survive; the allocation
    bursts trigger collections that walk every live one again, which took 40-60 % of the time.
    Nothing made there is cyclic garbage. The collector is process-wide: it is switched back on
    only if it was on, so nested or concurrent users at worst leave it off a little longer.

    What was made lives on, and switched back on, the collector would walk all of it at once as
    young objects (0.3-0.6 s for a million extents): it is moved to the oldest generation
    instead, without a walk (``freeze`` then ``unfreeze``), where full collections still free
    any cycle in it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
