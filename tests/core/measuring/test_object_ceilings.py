"""A bucket's storage bound: whole reads of the model, at the curve's best setting and, where
those fall far short of its short read, at its next; the explanation says which were short
reads and which whole, so a bound under a short read is no contradiction."""

from __future__ import annotations

from modelmon.core.measuring.ceiling_records import Ceiling, Ceilings
from modelmon.core.measuring.object_bounds import ObjectCurve, ObjectReading
from modelmon.core.measuring.object_ceilings import _storage
from modelmon.core.options import MiB
from modelmon.core.output.ceiling_words import measured_sentence


class ScriptedCurve(ObjectCurve):
    """A curve already swept (``short``: setting -> MB/s of its short read) whose whole reads
    give ``whole``'s rates, in order, per setting."""

    def __init__(self, short: dict[tuple[int, int], float], whole: dict) -> None:
        self.cancel = None
        self.readings = {key: [_reading(key, mbps)] for key, mbps in short.items()}
        self.whole = {}
        self.script = {key: list(rates) for key, rates in whole.items()}

    def sweep(self, on_point=None) -> tuple[int, int]:
        return self.best()

    def read(self, connections: int, part: int, whole: bool = False) -> ObjectReading:
        assert whole, "the curve is swept already"
        key = (connections, part)
        reading = _reading(key, self.script[key].pop(0))
        self.whole.setdefault(key, []).append(reading)
        return reading


def _reading(key: tuple[int, int], mbps: float) -> ObjectReading:
    return ObjectReading(key[0], key[1], mbps, 2_500_000_000, 2.5e9 / mbps / 1e6)


# The thirteenth walk's bucket: 16 connections of 64 MiB GETs led the short reads at
# 2231 MB/s; the whole model at that setting read at 990 MB/s, below the short reads of one
# connection (1214) and of eight (1656), and called the storage bound.
SHORT = {
    (1, 16 * MiB): 1214.0,
    (8, 16 * MiB): 1656.0,
    (16, 16 * MiB): 1188.0,
    (16, 64 * MiB): 2231.0,
}


def test_whole_reads_far_short_of_the_short_read_read_the_next_setting_too() -> None:
    curve = ScriptedCurve(SHORT, {(16, 64 * MiB): [990.0], (8, 16 * MiB): [1350.0]})
    storage = _storage(curve, repeats=1)
    assert storage.whole == (
        ("16 connection(s), 64 MiB GETs", 990.0),
        ("8 connection(s), 16 MiB GETs", 1350.0),
    )
    assert storage.mbps == 1350.0 and storage.runs == (1350.0,)
    assert storage.spec.startswith(
        "plain GETs of the whole model at the curve's two best settings: 16 connection(s), "
        "64 MiB GETs: 990 MB/s; 8 connection(s), 16 MiB GETs: 1350 MB/s (curve, a short read "
    ), storage.spec
    assert storage.spec_setting == "1350 MB/s at 8 connection(s), 16 MiB GETs"
    sentence = measured_sentence(Ceilings("s3://b/m/", (*_plain(), storage)))
    assert sentence == (
        "Measured on this bucket by plain GETs (nothing cached on this machine): short reads "
        "(the objects' first 1.5 s) ran at 1214 MB/s (1 connection, 16 MiB GETs) and 1656 "
        "MB/s (8 connections, 16 MiB GETs); whole reads of the model ran at 990 MB/s at the "
        "curve's best setting, 16 connections, 64 MiB GETs (2231 MB/s in its short read), and "
        "at 1350 MB/s at its next, 8 connections, 16 MiB GETs: the faster, 1350 MB/s, is the "
        "storage bound (this server gives the first seconds of a read more than a whole read)."
    ), sentence


def test_whole_reads_near_the_short_read_are_the_bound_alone() -> None:
    curve = ScriptedCurve(SHORT, {(16, 64 * MiB): [1900.0]})
    storage = _storage(curve, repeats=1)
    assert storage.whole == (("16 connection(s), 64 MiB GETs", 1900.0),)
    assert storage.mbps == 1900.0 and (8, 16 * MiB) not in curve.whole
    sentence = measured_sentence(Ceilings("s3://b/m/", (*_plain(), storage)))
    assert sentence is not None and sentence.endswith(
        "; whole reads of the model ran at 1900 MB/s at the curve's best setting, 16 "
        "connections, 64 MiB GETs (2231 MB/s in its short read): the storage bound."
    ), sentence


def _plain() -> tuple[Ceiling, Ceiling]:
    return (
        Ceiling("sequential_read", 1214.0, (1214.0,), "1 connection(s), 16 MiB GETs", None),
        Ceiling("parallel_read", 1656.0, (1656.0,), "8 connection(s), 16 MiB GETs", None),
    )
