"""Proactive reclaim as DAMON's sysfs interface describes it: a tree laid out as the kernel
lays out /sys/kernel/mm/damon/admin (files of one value each), and this machine's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelmon.core.system import memory_facts
from modelmon.core.system.proactive_reclaim import DAMON_ADMIN, proactive_reclaim


def _write(root: Path, values: dict[str, str]) -> None:
    for name, value in values.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")


def _kdamond(root: Path, state: str = "on", action: str = "pageout") -> Path:
    kdamond = root / "kdamonds" / "0"
    context = kdamond / "contexts" / "0"
    scheme = context / "schemes" / "0"
    _write(kdamond, {"state": state})
    _write(context, {"monitoring_attrs/intervals/aggr_us": "5000000"})
    _write(
        scheme,
        {
            "action": action,
            "access_pattern/age/min": "12",
            "quotas/bytes": str(128 << 20),
            "quotas/reset_interval_ms": "1000",
            "ops_filters/0/type": "anon",
            "ops_filters/0/matching": "Y",
            "ops_filters/0/allow": "N",
            "ops_filters/1/type": "unmapped",
            "ops_filters/1/matching": "Y",
            "ops_filters/1/allow": "Y",
        },
    )
    return root


def test_a_pageout_scheme_is_described_with_its_age_quota_and_filters(tmp_path: Path) -> None:
    line = proactive_reclaim(_kdamond(tmp_path))
    assert line == (
        "this host reclaims memory proactively (DAMON): it pages out memory idle for about "
        "60 s or more, up to 128 MiB every 1 s (only unmapped memory; never anon memory), "
        "so a warm page cache left untouched loses pages with no memory pressure"
    )


@pytest.mark.parametrize(
    ("state", "action"), [("off", "pageout"), ("on", "stat"), ("on", "lru_prio")]
)
def test_no_line_when_no_running_scheme_pages_out(tmp_path: Path, state: str, action: str) -> None:
    assert proactive_reclaim(_kdamond(tmp_path, state, action)) is None


def test_no_line_without_damon(tmp_path: Path) -> None:
    assert proactive_reclaim(tmp_path / "absent") is None


def test_this_machines_memory_facts_carry_what_its_damon_says() -> None:
    assert memory_facts().proactive_reclaim == proactive_reclaim(DAMON_ADMIN)
