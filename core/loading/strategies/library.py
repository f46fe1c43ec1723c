"""library: what users do today (safetensors ``safe_open().get_tensor``, the gguf reader)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from modelmon.core.errors import LoadError
from modelmon.core.loading.sink import array_dtype
from modelmon.core.loading.strategies.base import Strategy, WorkerContext, register, timed_read
from modelmon.core.model.plan import file_index


@register
class LibraryStrategy(Strategy):
    name = "library"
    maps_file = True  # safetensors' safe_open and the gguf reader both map the file
    summary = (
        "the baseline: safetensors safe_open(...).get_tensor / the gguf reader, "
        "bytes copied out by the library itself"
    )

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

        try:
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
