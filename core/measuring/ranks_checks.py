"""What N ranks on this node are refused before anything runs, each in one line: counts and
modes that cannot run (``check_ranks``), and ranks whose weights alone outgrow the memory
limit (``check_fits``)."""

from __future__ import annotations

from modelmon.core.errors import DoesNotFitError, OptionsError
from modelmon.core.loading.strategies import STRATEGIES, get_strategy
from modelmon.core.measuring.ranks_node import needs_why, weights_bytes
from modelmon.core.measuring.ranks_records import RANKS_MODES, RanksMode
from modelmon.core.model.records import Model
from modelmon.core.model.tensor_parallel import split_size
from modelmon.core.options import MAX_PARALLEL, LoadOptions
from modelmon.core.system.memory_limit import ram_text


def check_ranks(
    model: Model, strategy: str, ranks: int, mode: str, options: LoadOptions | None = None
) -> None:
    """OptionsError, in one line, for ranks that cannot be run as asked."""
    whole = isinstance(ranks, int) and not isinstance(ranks, bool)
    if not whole or not 1 <= ranks <= MAX_PARALLEL:
        raise OptionsError(f"ranks must be a whole number from 1 to {MAX_PARALLEL}, not {ranks!r}")
    if mode not in RANKS_MODES:
        raise OptionsError(f"unknown ranks mode {mode!r}: use {', '.join(RANKS_MODES)}")
    gguf = model.format == "gguf"
    widest = max(model.extents, key=lambda e: split_size(e, gguf), default=None)
    most = split_size(widest, gguf) if widest is not None else 0
    if mode == "slice" and widest is not None and 0 < most < ranks:
        raise OptionsError(
            f"{ranks} slice ranks, but no weight of the model splits {ranks} ways (the "
            f"widest, {widest.name}, splits {most} ways at most): every rank would hold "
            "every weight whole (engines refuse a tensor-parallel size its shapes cannot "
            "split)"
        )
    if mode == "one-reader" and not get_strategy(strategy).allocates:
        allocating = ", ".join(name for name in STRATEGIES if get_strategy(name).allocates)
        raise OptionsError(
            f"one-reader needs a strategy that reads into memory, not {strategy} (whose "
            f"tensors are views of the file's mapping): {allocating}"
        )
    if mode == "one-reader" and options is not None and options.discard:
        raise OptionsError("one-reader keeps one shared copy: it cannot discard")


def check_fits(model: Model, ranks: int, mode: RanksMode, limit: int) -> None:
    """DoesNotFitError, before anything runs, where the ranks' weights alone outgrow
    ``limit`` (N copies of a model for ``whole``): such a run is OOM-killed, or reads its
    model again and again under the limit for minutes. It names the modes that would fit."""
    weights = weights_bytes(model, ranks, mode)
    if weights <= limit:
        return
    fitting = [
        f"{other} holds {ram_text(weights_bytes(model, ranks, other))}"
        for other in RANKS_MODES
        if other != mode and weights_bytes(model, ranks, other) <= limit
    ]
    instead = f"; {', '.join(fitting)} (--ranks-mode)" if fitting else ""
    raise DoesNotFitError(
        f"{ranks} ranks {mode} do not fit in {ram_text(limit)}: they hold "
        f"{ram_text(weights)} of weights ({needs_why(mode, ranks, model)}), and their processes "
        f"more{instead}",
        weights,
        limit,
    )
