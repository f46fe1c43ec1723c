"""What the storage gives, as the explanation's first sentence says it: the plain readers'
(or plain GETs') ceilings measured on this model, each with the setting that gave it, so a
bound found with more readers than the parallel ceiling's does not read as a contradiction.
"""

from __future__ import annotations

import math
import re

from modelmon.core.measuring.ab import BEYOND_NOISE
from modelmon.core.measuring.ceiling_records import Ceiling, Ceilings
from modelmon.core.measuring.noise import BUCKET_RUN_NOISE
from modelmon.core.measuring.object_bounds import CURVE_POINT_S
from modelmon.core.output.comparison import counted_words
from modelmon.core.units import rate_text


def measured_sentence(ceilings: Ceilings) -> str | None:
    """ "Measured on this file by plain readers, cold: one streams ...": None where the
    sequential and parallel ceilings were not both measured."""
    sequential, parallel = ceilings.get("sequential_read"), ceilings.get("parallel_read")
    storage = ceilings.get("storage")
    if not (sequential and parallel):
        return None
    if sequential.verified is None:  # a bucket: no page cache
        best = f"; {_bound_of_curve(storage)}" if storage else ""
        return counted_words(
            "Measured on this bucket by plain GETs (nothing cached on this machine): short "
            f"reads (the objects' first {CURVE_POINT_S:g} s) ran at {sequential.spec_setting} "
            f"and {parallel.spec_setting}{best}."
        )
    cold = sequential.verified and parallel.verified
    best = f"; {_sweep_bound(storage)}" if storage is not None else " (the ceilings)"
    return counted_words(
        f"Measured on this file by plain readers, {'cold' if cold else 'not verified cold'}: "
        f"one streams {rate_text(sequential.mbps)}; {_readers(parallel)} with their own "
        f"descriptors reach {rate_text(parallel.mbps)}{best}."
    )


def _bound_of_curve(storage: Ceiling) -> str:
    """The storage bound of a bucket, told apart from the curve's points: a point is a short
    read, the bound whole reads of the model (the two differ); where the curve's best
    setting read whole fell short, its next was read whole too, and both are said."""
    if not storage.curve:
        return f"the storage bound: {storage.spec_setting}"
    short = dict(storage.curve)
    whole = storage.whole or ((max(storage.curve, key=lambda p: p[1])[0], storage.mbps),)
    (setting, mbps), *rest = whole
    said = (
        f"whole reads of the model ran at {rate_text(mbps)} at the curve's best setting, "
        f"{setting} ({rate_text(short.get(setting, mbps))} in its short read)"
    )
    said += "".join(f", and at {rate_text(m)} at its next, {s}" for s, m in rest)
    said += (
        f": the faster, {rate_text(storage.mbps)}, is the storage bound"
        if rest
        else ": the storage bound"
    )
    if math.log(max(short.values()) / storage.mbps) > BEYOND_NOISE * BUCKET_RUN_NOISE:
        said += " (this server gives the first seconds of a read more than a whole read)"
    return said


def _readers(parallel: Ceiling) -> str:
    """How many plain readers the parallel-read ceiling ran ("4"), from its spec; "parallel
    ones" where the spec does not say."""
    found = re.search(r"(\d+) (?:thread|reader)\(s\)", parallel.spec)
    return found.group(1) if found else "parallel ones"


def _sweep_bound(storage: Ceiling) -> str:
    """A file's storage bound with the setting of the sweep that gave it: it may be more
    readers than the parallel-read ceiling's, so it can be faster than that."""
    if not storage.curve:
        return f"the best plain reader, {rate_text(storage.mbps)}, is the storage bound"
    setting = max(storage.curve, key=lambda point: point[1])[0]
    return (
        f"the best of a sweep of plain readers, {setting}, reads at "
        f"{rate_text(storage.mbps)}: the storage bound"
    )
