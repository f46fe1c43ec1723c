"""The bounds bench's judgement: each configuration against its own bound of the same round,
and above it only past the bound's spread."""

from __future__ import annotations

from benchmarks.bounds import CONFIGS, judged


def _data(rates: dict[str, list[float]]) -> dict:
    runs = {
        label: [
            {"round": i, "mbps": r, "cold": True}
            for i, r in enumerate(rates.get(label, [500.0] * 3))
        ]
        for label, _ in CONFIGS
    }
    return {"storage": [700.0, 720.0, 710.0], "memory_fill": [460.0, 450.0, 470.0], "runs": runs}


def test_a_load_keeping_its_bytes_has_the_lower_bound_and_a_discard_the_storage():
    rows = {row["configuration"]: row for row in judged(_data({}))}
    kept, discard = rows["sequential ×4"], rows["sequential ×4 discard"]
    assert kept["bound_mbps"] == 460.0 and kept["bound"] == "lower of storage, memory fill"
    assert discard["bound_mbps"] == 710.0 and discard["bound"] == "storage"
    assert rows["engine: safetensors"]["bound_mbps"] == 460.0  # a program keeps its bytes
    assert rows["mmap-view ×4"]["bound_mbps"] == 710.0  # views of the mapping: no copy


def test_a_rate_above_its_bound_beyond_the_spread_is_caught_round_by_round():
    # 1 % over its own bound in each round: within the bound's ±2 % spread.
    rows = {r["configuration"]: r for r in judged(_data({"sequential ×4": [464.6, 454.5, 474.7]}))}
    assert abs(rows["sequential ×4"]["ratio"] - 1.01) < 0.001 and rows["sequential ×4"]["within"]
    rows = {r["configuration"]: r for r in judged(_data({"sequential ×4": [900.0, 900.0, 900.0]}))}
    assert not rows["sequential ×4"]["within"]
