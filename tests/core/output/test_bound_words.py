"""A bucket's best load far below the bound of plain GETs that discard their bytes: the
explanation says the connections measured did not close the gap, and where the server runs
on this machine, that it shares the load's CPUs."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceiling_records import Ceiling, Ceilings
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.options import MiB
from modelmon.core.output.bound_words import is_loopback
from modelmon.core.output.explain import explain
from modelmon.core.system.storage import StorageFacts

from ..measuring.records import candidate
from .test_explain import in_bucket, record

# The walk's bucket on loopback: 16 plain GETs of 64 MiB at 2,044 MB/s, a fill at 2,219.
BUCKET_BOUNDS = Ceilings(
    "m",
    (
        Ceiling("storage", 2044.0, (2044.0,), "16 connection(s), 64 MiB GETs", None),
        Ceiling("memory_fill", 2219.0, (2219.0,), "4 threads", None),
    ),
)


SAID = "The loads stayed at"


def said_of(
    model: Model, endpoint: str, ranked: tuple[Candidate, ...], bounds: Ceilings = BUCKET_BOUNDS
) -> list[str]:
    """The explanation's sentence on the bound, of ``ranked`` (the pick first) on a bucket
    at ``endpoint``: one line, or none."""
    rec = record(in_bucket(model, endpoint), winner=ranked[0], ranked=ranked, ceilings=bounds)
    return [line for line in explain(rec) if line.startswith(SAID)]


@pytest.fixture
def model(sharded_model: Path) -> Model:
    return open_model(sharded_model)


def test_a_bucket_load_far_below_its_bound_is_explained(model: Model) -> None:
    plain = candidate("ranged", 776, 1033, 1100, threads=1, chunk=1 << 30, role="baseline")
    many = candidate("ranged", 883, 984, threads=16, chunk=64 << 20)
    (said,) = said_of(model, "http://127.0.0.1:9557", (plain, many))
    assert said == (
        "The loads stayed at 934 MB/s–1033 MB/s (2 settings measured, 1 to 16 connections), "
        "under the 2044 MB/s plain GETs reach by discarding their bytes: a load also copies "
        "every byte into memory as it reads, and more connections are not what it lacks "
        "here; the endpoint is this machine, whose server shares the load's CPUs."
    )
    # A remote endpoint: no word of this machine's server.
    (said,) = said_of(model, "https://s3.us-east-1.amazonaws.com", (plain, many))
    assert said.endswith("and more connections are not what it lacks here.")


def test_near_its_bound_or_at_one_concurrency_nothing_is_added(model: Model) -> None:
    near = candidate("ranged", 1800, 1850, threads=16, chunk=64 << 20)
    other = candidate("ranged", 1700, threads=4, chunk=64 << 20)
    assert not said_of(model, "http://127.0.0.1:9557", (near, other))
    alone = candidate("ranged", 900, threads=16, chunk=64 << 20)
    same = candidate("ranged", 880, threads=16, chunk=16 << 20)
    assert not said_of(model, "http://127.0.0.1:9557", (alone, same))


def test_a_loopback_endpoint_is_known_by_its_host() -> None:
    assert is_loopback("http://127.0.0.1:9000") and is_loopback("http://localhost:9000")
    assert is_loopback("http://[::1]:9000")
    assert not is_loopback("https://s3.us-east-1.amazonaws.com")
    assert not is_loopback("http://10.0.0.5:9000")


def test_a_pick_at_three_quarters_of_its_bound_is_explained_too(model: Model) -> None:
    """The fifth walk: the plain download at 1,240 MB/s, 4 connections of 16 MiB (the bound's
    own setting) at 1,056, against the bound's 1,703: 73 %."""
    bounds = Ceilings(
        "m", (Ceiling("storage", 1703.0, (1703.0,), "4 connection(s), 16 MiB GETs", None),)
    )
    plain = candidate("ranged", 1240, threads=1, chunk=1 << 30, role="baseline")
    four = candidate("ranged", 1056, threads=4, chunk=16 << 20)
    (said,) = said_of(model, "http://127.0.0.1:9557", (plain, four), bounds)
    assert "1056 MB/s–1240 MB/s (2 settings measured, 1 to 4 connections)" in said


def test_a_probe_run_above_the_bound_is_said(model: Model) -> None:
    """Walk 25: "reads at 2144 MB/s: the storage bound" and later "It holds at a memory limit
    of 2512 MiB (2243 MB/s, ...)": a run of the pick under a smaller limit, 5 % above its
    bound, with no word. The probes are runs of the pick as its search runs are."""
    from modelmon.core.measuring.limit_probe import LimitProbe, LimitProbes

    storage = Ceiling("storage", 2144.0, (2144.0,), "best of a sweep", True)
    pick = candidate("sequential", 911, 1330, 1726, workers=4, chunk=16 * MiB)
    held = LimitProbe(2512 * MiB, True, 2243.0, 2600 * MiB, 48 * MiB, "")
    probes = LimitProbes(4 << 30, 2200 * MiB, (held,))
    rec = record(
        model, winner=pick, ranked=(pick,), ceilings=Ceilings("m", (storage,)), limit_probes=probes
    )
    text = " ".join(explain(rec))
    assert (
        "1 of its 4 runs (the search's 3 and 1 under a smaller memory limit) read faster than "
        "the storage bound "
        "(2243 MB/s against 2144 MB/s, one read)"
    ) in text, text
    assert "the pick's own runs 911 MB/s–2243 MB/s" in text, text
    slower = dataclasses.replace(held, mbps=2100.0)
    rec = dataclasses.replace(rec, limit_probes=dataclasses.replace(probes, probes=(slower,)))
    assert "read faster than the" not in " ".join(explain(rec))


# The walk's FUSE mount: plain readers discarding their bytes at 420 MB/s, keeping them at 330.
FUSE_BOUNDS = Ceilings(
    "m",
    (
        Ceiling("storage", 420.0, (410.0, 420.0, 430.0), "1 reader(s), buffered", True),
        Ceiling("memory_fill", 2900.0, (2900.0,), "2 threads", True),
        Ceiling("keeping_read", 330.0, (330.0,), "kept in fresh memory", True),
    ),
)
FUSE = StorageFacts(
    "/mnt/m", "/mnt", "fuse.rclone", "remote:", None, None, None, None, None, None, True, True, ""
)


def keeping_said(model: Model, pick: Candidate, bounds: Ceilings = FUSE_BOUNDS) -> list[str]:
    rec = record(model, winner=pick, ranked=(pick,), ceilings=bounds, storage=FUSE)
    return [line for line in explain(rec) if "plain readers that keep" in line]


def test_a_keeping_load_under_its_bound_is_set_beside_plain_keeping_readers(model: Model) -> None:
    (said,) = keeping_said(model, candidate("sequential", 310, 320, 300, workers=4))
    assert said == (
        "What holds the rest is this machine's: plain readers that keep their bytes in fresh "
        "memory, as a load does, read at 330 MB/s here, 79% of the storage bound (the mount's "
        f"FUSE daemon, the reads and faulting in fresh memory share {os.cpu_count()} CPUs); "
        "the pick reads at 0.94× that."
    )
    (slow,) = keeping_said(model, candidate("sequential", 200, 210, 190, workers=4))
    assert slow.startswith("Keeping costs: plain readers") and slow.endswith("at 0.61× that.")
    # Near its bound, a view that keeps nothing, or keeping readers near the bound: nothing.
    assert not keeping_said(model, candidate("sequential", 390, 400, 380, workers=4))
    assert not keeping_said(model, candidate("mmap-view", 300, 310, 290, workers=4))
    near = dataclasses.replace(
        FUSE_BOUNDS,
        items=(*FUSE_BOUNDS.items[:2], Ceiling("keeping_read", 410.0, (410.0,), "", True)),
    )
    assert not keeping_said(model, candidate("sequential", 310, 320, 300, workers=4), near)
