"""library: what users do today (safetensors ``safe_open().get_tensor``, the gguf reader).

safetensors hands numpy a float8 tensor as ``numpy.float8_e4m3fn`` (and ``float8_e5m2``,
``float8_e8m0fnu``, the ``fnuz`` pair): names numpy does not have and ml_dtypes does. While
the strategy runs, numpy lends them from ml_dtypes (``numpy_float8_names``), so the library's
own code path loads them. F4 (``float4_e2m1fn_x2``, two values a byte) and the 6-bit types
have no numpy type at all: the strategy refuses such a model before it starts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from modelmon.core.errors import LoadError
from modelmon.core.loading.sink import array_dtype
from modelmon.core.loading.strategies.base import Strategy, WorkerContext, register, timed_read
from modelmon.core.model.plan import file_index
from modelmon.core.model.records import Model

# safetensors dtype → the numpy module attribute safetensors asks for (its get_pydtype)
FLOAT8_NAMES = {
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
}
NO_NUMPY_TYPE = {
    "F4": "F4 tensors (two 4-bit values a byte, float4_e2m1fn_x2)",
    "F6_E2M3": "F6_E2M3 tensors (6-bit)",
    "F6_E3M2": "F6_E3M2 tensors (6-bit)",
}

_lent_lock = threading.Lock()
_lent_users = 0
_lent: list[str] = []


@contextmanager
def numpy_float8_names(dtypes: set[str]) -> Iterator[None]:
    """numpy holds ml_dtypes' float8 types under the names safetensors asks it for, while the
    block runs; the names numpy did not have before are taken back by the last user."""
    global _lent_users
    import ml_dtypes

    wanted = [FLOAT8_NAMES[dtype] for dtype in dtypes if dtype in FLOAT8_NAMES]
    with _lent_lock:
        for name in wanted:
            if not hasattr(np, name):
                setattr(np, name, getattr(ml_dtypes, name))
                _lent.append(name)
        _lent_users += 1
    try:
        yield
    finally:
        with _lent_lock:
            _lent_users -= 1
            if _lent_users == 0:
                for name in _lent:
                    delattr(np, name)
                _lent.clear()


@register
class LibraryStrategy(Strategy):
    name = "library"
    maps_file = True  # safetensors' safe_open and the gguf reader both map the file
    summary = (
        "the baseline: safetensors safe_open(...).get_tensor / the gguf reader, "
        "bytes copied out by the library itself"
    )
    descriptors_per_file = 0  # safetensors maps each file and closes it; GGUF is one file

    @classmethod
    def cannot_load(cls, model: Model) -> str | None:
        if model.format != "safetensors":
            return None
        dtypes = {extent.dtype for extent in model.extents}
        unloadable = [NO_NUMPY_TYPE[dtype] for dtype in sorted(dtypes) if dtype in NO_NUMPY_TYPE]
        if unloadable:
            return (
                f"safetensors cannot hand {unloadable[0]} to numpy, which has no type for "
                "them; another strategy loads their bytes"
            )
        import ml_dtypes

        missing = [
            d
            for d in sorted(dtypes)
            if d in FLOAT8_NAMES and not hasattr(ml_dtypes, FLOAT8_NAMES[d])
        ]
        if missing:
            return (
                f"its {missing[0]} tensors need a newer ml_dtypes (for {FLOAT8_NAMES[missing[0]]})"
            )
        return None

    def run(self, ctx: WorkerContext) -> None:
        if ctx.model.format == "gguf":
            self._run_gguf(ctx)
        else:
            self._run_safetensors(ctx)

    def _run_safetensors(self, ctx: WorkerContext) -> None:
        from safetensors import safe_open

        # BF16/F8 tensors need ml_dtypes registered before safetensors asks numpy for them.
        for index in ctx.indexes:
            array_dtype(ctx.model.extents[index].array_dtype)
        order = file_index(ctx.model)
        local = threading.local()
        opened: list[Any] = []
        lock = threading.Lock()

        def handle(path: str) -> Any:
            handles = getattr(local, "handles", None)
            if handles is None:
                handles = local.handles = {}
            if path not in handles:
                manager = safe_open(path, framework="numpy")
                # safetensors ships no annotation for __enter__
                handles[path] = manager.__enter__()  # type: ignore[no-untyped-call]
                with lock:
                    opened.append(manager)
            return handles[path]

        def load(index: int) -> None:
            extent = ctx.model.extents[index]
            tensor = timed_read(
                ctx.recorder,
                order[extent.file],
                extent.offset,
                extent.length,
                handle(extent.file).get_tensor,
                extent.name,
            )
            ctx.sink.adopt(index, tensor)

        dtypes = {ctx.model.extents[index].dtype for index in ctx.indexes}
        try:
            with numpy_float8_names(dtypes):
                ctx.tensors_in_threads(load)
        finally:
            for manager in opened:
                manager.__exit__(None, None, None)

    def _run_gguf(self, ctx: WorkerContext) -> None:
        from modelmon.core.loading.strategies.gguf_reader import with_gguf_reader

        def load_all(reader: Any) -> None:
            by_name = {tensor.name: tensor for tensor in reader.tensors}

            def load(index: int) -> None:
                extent = ctx.model.extents[index]
                theirs = by_name[extent.name]
                if int(theirs.data_offset) != extent.offset:  # the read would be mislabelled
                    where = f"at {theirs.data_offset}, not at {extent.offset}"
                    raise LoadError(f"{extent.name}: the gguf reader reads it {where}")
                tensor = timed_read(
                    ctx.recorder, 0, extent.offset, extent.length, np.array, theirs.data
                )
                ctx.sink.adopt(index, tensor)  # a copy: nothing keeps a view of the map

            ctx.tensors_in_threads(load)

        with_gguf_reader(ctx.model.files[0].path, load_all)
