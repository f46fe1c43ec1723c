"""``fleet --csv``: a save that fails after the cluster ran keeps the rows and says where.

The cluster is stood in for by a module in ``modelmon.fleet.cluster``'s place (Ray is an
optional extra; tests/modelmon/fleet/test_cluster.py runs a real one where it is installed):
its ``run_fleet`` deletes the CSV's folder while "the nodes load", then returns real node runs.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelmon.cli import main
from modelmon.core import CacheState
from modelmon.fleet.node import NodeRun
from modelmon.fleet.report import FleetResult, Side

COLD = CacheState("cold", 0.0, math.nan, True, False, "cachestat")
NOT_SAVED = 4


def node_run(node: str) -> NodeRun:
    return NodeRun(
        node_id=node,
        host=f"host-{node}",
        side="load",
        round=0,
        spec="sequential",
        status="ok",
        error=None,
        bytes=100_000_000,
        seconds=1.0,
        start_wall=1000.0,
        peak_rss=1 << 20,
        cache=COLD,
        storage=(),
    )


def stand_in_cluster(monkeypatch: pytest.MonkeyPatch, during_the_run: Path) -> None:
    @contextlib.contextmanager
    def connection(_address: str) -> Iterator[None]:
        yield

    def run_fleet(
        verb: str, model: str, sides: list[Side], *_: object, **__: object
    ) -> FleetResult:
        shutil.rmtree(during_the_run)
        return FleetResult(verb, model, tuple(sides), (node_run("n1"), node_run("n2")))

    cluster = types.ModuleType("modelmon.fleet.cluster")
    cluster.Connection = connection  # type: ignore[attr-defined]
    cluster.run_fleet = run_fleet  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", types.ModuleType("ray"))
    monkeypatch.setitem(sys.modules, "modelmon.fleet.cluster", cluster)


def test_rows_whose_folder_went_away_during_the_run_are_kept_and_said(
    sharded_model: Path,
    tmp_path: Path,
    own_state: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    stand_in_cluster(monkeypatch, during_the_run=folder)
    code = main(["fleet", "load", str(sharded_model), "--csv", str(folder / "nodes.csv")])
    out, err = capsys.readouterr()
    assert code == NOT_SAVED, err
    assert err.count("\n") == 1 and "Traceback" not in err
    kept = own_state / "modelmon" / "unsaved" / "nodes.csv"
    assert err.rstrip().endswith(f"the rows are kept in {kept}")
    rows = kept.read_text().splitlines()
    assert rows[0].startswith("node_id,") and [row.split(",")[0] for row in rows[1:]] == [
        "n1",
        "n2",
    ]
    assert out.startswith("fleet load of")  # the report, as without --csv
    assert not folder.exists()  # never made again


def test_csv_to_standard_output_puts_the_report_on_stderr(
    sharded_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "unused"
    folder.mkdir()
    stand_in_cluster(monkeypatch, during_the_run=folder)
    assert main(["fleet", "load", str(sharded_model), "--csv", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("node_id,") and "fleet load of" not in out
    assert err.startswith("fleet load of")
