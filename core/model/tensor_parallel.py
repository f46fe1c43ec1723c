"""A tensor-parallel rank's part of a model, as engines shard a checkpoint over N ranks.

Megatron-style tensor parallelism (vLLM's, SGLang's) splits each weight of a layer between
the ranks: column-parallel ones (attention's q, k, v; the MLP's gate and up), the embedding
and the head (vocabulary-parallel) along their first dimension, which in a row-major
checkpoint is one contiguous range per rank; row-parallel ones (attention's output, the MLP's
down projection) along their second dimension, a stretch of every row: strided. Norms and
biases of row-parallel layers are whole on every rank, and so are a model's integer buffers
(BERT's ``position_ids``, I64 [1, 512]: no engine shards an index) and any tensor with fewer
entries along its split than there are ranks (``replicated``).

A contiguous part becomes an extent of its own (the rank reads just those bytes). A strided
part is read whole and kept in part (``KeptPart``): its rows are a few KiB each, under what
a read over a gap costs to skip (the page cache reads whole pages anyway), as a loader that
maps the file and slices it reads them. A GGUF's tensors are split along their rows only
(quantized blocks cannot be cut within a row).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from modelmon.core.model.records import Model, TensorExtent, collector_paused

# Row-parallel weights, by the names HF checkpoints and GGUF give them: split along their
# second dimension.
ROW_PARALLEL = re.compile(
    r"(o_proj|down_proj|out_proj|dense_4h_to_h|attention\.dense|attn\.c_proj|mlp\.c_proj"
    r"|\.wo|\.w2|attn_output|ffn_down)\.weight$"
)


@dataclass(frozen=True, slots=True)
class KeptPart:
    """Of a tensor read whole, what one rank keeps: bytes [start, stop) of each of its
    ``rows`` rows of ``row_bytes``, as an array of ``array_shape``."""

    rows: int
    row_bytes: int
    start: int
    stop: int
    array_shape: tuple[int, ...]

    @property
    def length(self) -> int:
        return self.rows * (self.stop - self.start)


def _share(length: int, rank: int, ranks: int) -> tuple[int, int]:
    """Rank ``rank``'s [low, high) of ``length`` rows split ``ranks`` ways, as engines do:
    ceil(length / ranks) each, the last ones shorter (or empty)."""
    per = -(-length // ranks)
    return min(length, rank * per), min(length, (rank + 1) * per)


# Integer tensors are buffers (positions, token types, indices), never sharded. GGUF's
# quantized types are not integers: they are split along their rows.
BUFFER_DTYPES = frozenset({"I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL"})


def split_size(extent: TensorExtent, gguf: bool) -> int:
    """How many ways ``extent`` can be split at most: its entries along its split (0 for a
    scalar, a norm or a bias, an integer buffer: never split)."""
    shape = extent.array_shape
    if len(shape) < 2 or extent.length == 0 or (not gguf and extent.dtype in BUFFER_DTYPES):
        return 0
    return shape[1] if not gguf and ROW_PARALLEL.search(extent.name) else shape[0]


def replicated(extent: TensorExtent, ranks: int, gguf: bool) -> bool:
    """Whether every rank holds ``extent`` whole: a scalar, a norm or a bias (one dimension),
    an integer buffer, or a tensor with fewer entries along its split than ``ranks``."""
    return split_size(extent, gguf) < max(ranks, 1) or split_size(extent, gguf) == 0


def tp_slice(model: Model, rank: int, ranks: int) -> tuple[Model, dict[str, KeptPart]]:
    """Rank ``rank`` of ``ranks``'s part of ``model``: a model of the extents it reads, and
    of those it reads whole, what it keeps (by extent name). ``ranks == 1``: all of it."""
    if ranks == 1:
        return model, {}
    if not 0 <= rank < ranks:
        raise ValueError(f"rank {rank} is not one of 0..{ranks - 1}")
    gguf = model.format == "gguf"
    extents: list[TensorExtent] = []
    parts: dict[str, KeptPart] = {}
    with collector_paused():
        for extent in model.extents:
            shape = extent.array_shape
            if replicated(extent, ranks, gguf):
                extents.append(extent)  # a norm, a bias, a buffer: whole on every rank
                continue
            rows = shape[0]
            row_bytes = extent.length // rows if rows else 0
            if not gguf and ROW_PARALLEL.search(extent.name) and shape[1]:
                low, high = _share(shape[1], rank, ranks)
                inner = row_bytes // shape[1]  # bytes of one column of a row
                parts[extent.name] = KeptPart(
                    rows, row_bytes, low * inner, high * inner, (rows, high - low, *shape[2:])
                )
                extents.append(extent)
                continue
            low, high = _share(rows, rank, ranks)
            kept = (high - low, *shape[1:])
            own = extent.shape
            own_shape = (*own[:-1], high - low) if gguf else (high - low, *own[1:])
            extents.append(
                extent._replace(
                    offset=extent.offset + low * row_bytes,
                    length=(high - low) * row_bytes,
                    shape=own_shape,
                    array_shape=kept,
                )
            )
        used = {extent.file for extent in extents}
        files = tuple(f for f in model.files if f.path in used)
        sliced = Model(model.path, model.format, files, tuple(extents), model.metadata, model.kind)
        return sliced, parts


def kept_bytes(model: Model, parts: dict[str, KeptPart]) -> int:
    """What a rank keeps of its part: its extents, those read whole counted as their part."""
    return sum(parts[e.name].length if e.name in parts else e.length for e in model.extents)
