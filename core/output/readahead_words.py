"""The device readahead of a pick in words: the commands that keep a value for the model's
storage (modelmon sets it only for its own runs), and the sentence that says what a pick's
readahead measured against the device's own value."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelmon.core.model.records import Model
from modelmon.core.output.run_words import all_cold
from modelmon.core.system import readahead
from modelmon.core.units import rate_text

if TYPE_CHECKING:
    from modelmon.core.measuring.recommend import Recommendation


def permanent_readahead(model: Model, kb: int) -> tuple[str, ...]:
    """The commands that keep device readahead ``kb`` KiB for the model's storage."""
    knob = readahead.locate(model.files[0].path)
    return knob.permanent(kb) if knob is not None else ()


def readahead_sentence(rec: Recommendation) -> list[str]:
    """A sentence when the pick sets the device's readahead: measured against the same
    configuration at the device's own value, and how to make it permanent."""
    used = rec.used
    kb = used.options.readahead
    if kb is None:
        return []
    plain = next(
        (c for c in rec.ranked if c.results and c.options == used.options.with_(readahead=None)),
        None,
    )
    knob = readahead.locate(rec.model.files[0].path)
    own = f"the device's own {knob.read_kb()} KiB" if knob is not None else "the device's own"
    versus = (
        f" against {rate_text(plain.median_mbps)} with {own} "
        f"(measured{', cold' if all_cold(plain.results) else ''})"
        if plain is not None and plain.strategy == used.strategy
        else ""
    )
    rate = rate_text(used.median_mbps)
    line = f"Readahead {kb} KiB on the model's device: {rate}{versus}."
    commands = permanent_readahead(rec.model, kb)
    if commands:
        line += " modelmon sets it only for its runs; to keep it: " + "; or ".join(commands)
        if knob is not None and knob.kind == "block":
            line += " (blockdev counts 512-byte sectors)"
        line += "."
    return [line]
