"""What a worker loads, handed to it by its parent: the model's tensors as compact columns.

The parent has parsed the model's header; a worker does not parse it again. A header of a
million tensors takes seconds to parse and leaves its parser's garbage spread over a gigabyte
of the process's heap, per worker. Instead the parent writes each worker's part (only its own
tensors when the workers keep fixed shares; all of them when they share one queue of work,
since any reader may take any of it) into a memfd, as columns: names, file indexes, offsets,
lengths, and codes into small tables of the (dtype, shape) kinds and block names the part
uses. The worker rebuilds its ``Model`` from them, with every kind and block shared between
its tensors, and keeps the files' indexes as the parent numbers them (the read log names
files by index). A memfd, not the worker's pipe: writing it never waits for the worker. Its
content is data, never code: a JSON document (the names and tables), then the numeric columns
as raw arrays (``to_bytes``, ``from_bytes``).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from modelmon.core.model.plan import partition
from modelmon.core.model.records import Model, ModelFile, TensorExtent, collector_paused
from modelmon.core.storage.facts import ObjectFacts

Kind = tuple[str, tuple[int, ...], str, tuple[int, ...]]  # dtype, shape, array dtype, shape


@dataclass(frozen=True, slots=True)
class ModelPart:
    """Some of a model's tensors, in the order of their indexes in the parent's model."""

    path: str
    format: str
    files: tuple[ModelFile, ...]  # every file of the model: the parent's file indexes hold
    names: list[str]
    file_indexes: array[int]
    offsets: array[int]
    lengths: array[int]
    kinds: list[Kind]
    kind_codes: array[int]
    blocks: list[str]
    block_codes: array[int]

    @classmethod
    def of(cls, model: Model, indexes: Sequence[int]) -> ModelPart:
        """Tensors ``indexes`` of ``model`` (all of them: ``range(len(model.extents))``)."""
        with collector_paused():
            file_of = {f.path: i for i, f in enumerate(model.files)}
            kinds: dict[Kind, int] = {}
            blocks: dict[str, int] = {}
            extents = [model.extents[i] for i in indexes]
            kind_codes = array(
                "I",
                [
                    kinds.setdefault((e.dtype, e.shape, e.array_dtype, e.array_shape), len(kinds))
                    for e in extents
                ],
            )
            block_codes = array("I", [blocks.setdefault(e.block, len(blocks)) for e in extents])
            return cls(
                model.path,
                model.format,
                model.files,
                [e.name for e in extents],
                array("I", [file_of[e.file] for e in extents]),
                array("q", [e.offset for e in extents]),
                array("q", [e.length for e in extents]),
                list(kinds),
                kind_codes,
                list(blocks),
                block_codes,
            )

    def _columns(self) -> tuple[array[int], ...]:
        return (self.file_indexes, self.offsets, self.lengths, self.kind_codes, self.block_codes)

    def to_bytes(self) -> bytes:
        """The JSON document's length (8 bytes, little-endian), the document, then each
        numeric column's raw items (their sizes and typecodes are in the document)."""
        columns = self._columns()
        document = {
            "path": self.path,
            "format": self.format,
            # An object's facts go too: its reads are made If-Match the ETag it was opened with.
            "files": [[f.path, f.size, f.remote and f.remote.handout()] for f in self.files],
            "names": self.names,
            "kinds": self.kinds,
            "blocks": self.blocks,
            "columns": [[c.typecode, len(c)] for c in columns],
        }
        text = json.dumps(document, separators=(",", ":")).encode()
        return b"".join([struct.pack("<Q", len(text)), text, *(c.tobytes() for c in columns)])

    @classmethod
    def from_bytes(cls, data: bytes | memoryview | mmap.mmap) -> ModelPart:
        with memoryview(data) as view:  # released before a mapping under it is closed
            (size,) = struct.unpack_from("<Q", view)
            document = json.loads(bytes(view[8 : 8 + size]))
            position, columns = 8 + size, []
            for typecode, count in document["columns"]:
                column = array(typecode)
                end = position + count * column.itemsize
                column.frombytes(view[position:end])
                columns.append(column)
                position = end
        files, kinds = document["files"], document["kinds"]
        return cls(
            document["path"],
            document["format"],
            tuple(
                ModelFile(path, size, ObjectFacts(**remote) if remote else None)
                for path, size, remote in files
            ),
            document["names"],
            columns[0],
            columns[1],
            columns[2],
            [(d, tuple(shape), a, tuple(array_shape)) for d, shape, a, array_shape in kinds],
            columns[3],
            document["blocks"],
            columns[4],
        )

    def model(self) -> Model:
        """The part as a ``Model``: its tensors in the order given, the whole model's files."""
        paths = [f.path for f in self.files]
        kinds, blocks = self.kinds, self.blocks
        tails: dict[tuple[int, int], tuple[str, tuple[int, ...], str, str, tuple[int, ...]]] = {}

        def tail(kind: int, block: int) -> tuple[str, tuple[int, ...], str, str, tuple[int, ...]]:
            """The fields after the length, one tuple per kind and block for all tensors."""
            found = tails.get((kind, block))
            if found is None:
                dtype, shape, array_dtype, array_shape = kinds[kind]
                found = tails[kind, block] = (dtype, shape, blocks[block], array_dtype, array_shape)
            return found

        with collector_paused():
            columns = zip(
                self.names,
                self.file_indexes,
                self.offsets,
                self.lengths,
                self.kind_codes,
                self.block_codes,
                strict=True,
            )
            extents = tuple(
                TensorExtent(name, paths[file], offset, length, *tail(kind, block))
                for name, file, offset, length, kind, block in columns
            )
        return Model(self.path, self.format, self.files, extents)


class Handout:
    """One worker's part, written to a memfd by the parent, read once by the worker. Passed in
    the worker's spawn arguments (the descriptor is duplicated into the child)."""

    def __init__(self, part: ModelPart) -> None:
        self._fd = os.memfd_create("modelmon-model-part", os.MFD_CLOEXEC)
        try:
            view = memoryview(part.to_bytes())
            while view:
                view = view[os.write(self._fd, view) :]
        except BaseException:
            self.close()
            raise

    def __getstate__(self) -> dict[str, Any]:  # only while spawning a worker
        from multiprocessing import reduction

        return {"fd": reduction.DupFd(self._fd)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._fd = state["fd"].detach()

    def take(self) -> ModelPart:
        """The worker's side, once: read the part and close the memfd (its memory goes when
        the parent and every other worker handed it have closed theirs too). Read through a
        mapping: workers handed one part share its descriptor's file offset."""
        try:
            size = os.fstat(self._fd).st_size
            with mmap.mmap(self._fd, size, prot=mmap.PROT_READ) as mapping:
                return ModelPart.from_bytes(mapping)
        finally:
            self.close()

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


def hand_out(model: Model, workers: int, mode: str | None) -> list[Handout]:
    """Each worker's handout: its share of ``model``'s tensors dealt by partition ``mode``, or
    with ``mode`` None (the workers share one queue of work) one handout of all for all."""
    if mode is None:
        return [Handout(ModelPart.of(model, range(len(model.extents))))] * workers
    handouts: list[Handout] = []
    try:
        for share in partition(model, workers, mode):
            handouts.append(Handout(ModelPart.of(model, share)))
    except BaseException:
        for handout in handouts:
            handout.close()
        raise
    return handouts
