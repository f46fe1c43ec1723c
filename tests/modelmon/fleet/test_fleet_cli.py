"""``load --ranks`` and ``fleet`` from the command line; Ray stays out of everything else."""

from __future__ import annotations

import ast
import contextlib
import json
import math
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from modelmon.cli import main
from modelmon.core import CacheState, open_model
from modelmon.fleet.node import NodeRun
from modelmon.fleet.report import FleetResult

ROOT = Path(__file__).resolve().parents[3]
MODELMON = [sys.executable, "-m", "modelmon"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MODELMON, *args], capture_output=True, text=True, timeout=120, check=False
    )


def refuse(constant: str) -> None:
    raise ValueError(f"not strict JSON: {constant}")


def test_load_ranks_json_has_every_rank(sharded_model: Path) -> None:
    done = run("load", str(sharded_model), "--ranks", "3", "--workers", "2", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout, parse_constant=refuse)
    total = open_model(sharded_model).total_bytes
    assert document["status"] == "ok" and document["mode"] == "whole"
    assert document["split"] is False
    assert [r["rank"] for r in document["ranks"]] == [0, 1, 2]
    for rank in document["ranks"]:
        assert rank["status"] == "ok" and rank["read_bytes"] == total
        assert rank["mbps"] > 0 and rank["seconds"] > 0
    assert document["read_bytes"] == 3 * total
    # The node's rate: the model on every rank by the slowest rank's end.
    assert document["mbps"] == pytest.approx(total / document["seconds"] / 1e6, rel=1e-3)
    assert document["node"]["peak_bytes"] > 0
    assert document["straggler"]["who"].startswith("rank ")
    assert document["cache"]["requested"] == "cold"


def test_load_ranks_split_text(sharded_model: Path) -> None:
    done = run("load", str(sharded_model), "--ranks", "2", "--ranks-split")
    assert done.returncode == 0, done.stderr
    assert "2 ranks, slice" in done.stdout and "slowest rank:" in done.stdout
    both = run("load", str(sharded_model), "--ranks-split", "--ranks-mode", "whole")
    assert both.returncode == 2 and "--ranks-split is --ranks-mode slice" in both.stderr


def test_load_ranks_refuses_samples_and_zero(sharded_model: Path) -> None:
    assert run("load", str(sharded_model), "--ranks", "2", "--samples", "--json").returncode == 2
    zero = run("load", str(sharded_model), "--ranks", "0")
    assert zero.returncode == 2 and "--ranks: must be a whole number from 1 to 256" in zero.stderr


def test_fleet_without_ray_says_how_to_install_it(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    code = main(["fleet", "load", str(sharded_model), "--address", "auto"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "pip install 'modelmon[fleet]'" in err


def _ray_imports(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            lines += [node.lineno for a in node.names if a.name.split(".")[0] == "ray"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ray":
            lines.append(node.lineno)
    return lines


def test_only_the_fleet_imports_ray() -> None:
    allowed = {ROOT / "modelmon/fleet/cluster.py", ROOT / "modelmon/cli/fleet.py"}
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in ("core", "modelmon", "gui")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path not in allowed
        for line in _ray_imports(path)
    ]
    assert offenders == []
    assert _ray_imports(ROOT / "modelmon/fleet/cluster.py")  # the check looks at real imports


def test_the_cli_loads_no_ray_until_fleet_runs() -> None:
    code = "import sys, modelmon.cli as c; c.build_parser(); print('ray' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        ((), 2, "modelmon fleet needs Ray, which is not installed"),  # taken: ranged
        (("--strategy", "sequential"), 1, "object storage: use ranged or ranged-stream"),
    ],
)
def test_fleet_takes_a_bucket_and_refuses_a_file_strategy_on_it_before_ray(
    rclone_s3: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    code: int,
    says: str,
) -> None:
    """A bucket passes every usage check (with the model's own default strategy) and gets as
    far as Ray; a strategy that cannot read it is refused before Ray, in one line."""
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert main(["fleet", "load", "s3://models/large/", *args]) == code
    (line,) = capsys.readouterr().err.splitlines()
    assert says in line, line


def stand_in_cluster(monkeypatch: pytest.MonkeyPatch, run_fleet: Any) -> None:
    """``modelmon.fleet.cluster`` without Ray: its connection does nothing, its ``run_fleet``
    is the test's."""

    @contextlib.contextmanager
    def connection(_address: str) -> Iterator[None]:
        yield

    cluster = types.ModuleType("modelmon.fleet.cluster")
    cluster.Connection = connection  # type: ignore[attr-defined]
    cluster.run_fleet = run_fleet  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", types.ModuleType("ray"))
    monkeypatch.setitem(sys.modules, "modelmon.fleet.cluster", cluster)


@pytest.mark.parametrize(
    ("flags", "bound", "timeout"),
    [
        (("--threads", "4", "--chunk-mib", "2", "--storage-timeout", "5"), (4, 2 << 20), 5.0),
        (("--no-bound",), None, None),
    ],
)
def test_fleet_on_a_bucket_asks_every_node_for_the_objects_the_driver_opened(
    rclone_s3: SimpleNamespace,
    monkeypatch: pytest.MonkeyPatch,
    flags: tuple[str, ...],
    bound: tuple[int, int] | None,
    timeout: float | None,
) -> None:
    """What the nodes are asked (through a stand-in for the cluster): the URL as given, the
    objects and endpoint the driver opened (never a credential), the storage timeout, and
    the bound at the load's own connections and part size unless --no-bound."""
    asked: dict[str, Any] = {}

    def run_fleet(verb: str, path: str, sides: list[Any], *_: object, **kwargs: Any) -> Any:
        asked.update(kwargs, path=path, spec=sides[0].spec)
        return FleetResult(verb, path, tuple(sides), ())

    stand_in_cluster(monkeypatch, run_fleet)
    assert main(["fleet", "load", "s3://models/sharded/", "--json", *flags]) == 0
    model = open_model("s3://models/sharded/")
    assert asked["path"] == "s3://models/sharded/" and asked["spec"].startswith("ranged ")
    same = asked["same"]
    assert same.endpoint == rclone_s3.env["AWS_ENDPOINT_URL"]
    assert same.objects == tuple((f.remote.url, f.remote.size, f.remote.etag) for f in model.files)
    assert (asked["bound"], asked["storage_timeout_s"]) == (bound, timeout)
    assert rclone_s3.env["AWS_SECRET_ACCESS_KEY"] not in repr(asked)


def test_fleet_refuses_a_strategy_that_cannot_load_the_model_before_ray(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    code = main(["fleet", "load", str(sharded_model), "--strategy", "ranged"])
    (line,) = capsys.readouterr().err.splitlines()
    assert code == 1 and "the ranged strategy cannot load" in line, line


def test_the_last_line_names_the_node_that_ended_the_run_not_one_that_withdrew(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node without credentials withdrew, another's load then failed (throttled) and
    stopped a third: the run's one line is the failure that ended it."""
    cold = CacheState("cold", 0.0, math.nan, True, False, "cachestat")
    row: dict[str, Any] = {
        "host": "h", "side": "load", "round": 0, "spec": "ranged", "bytes": 0, "seconds": 0.0,
        "start_wall": 0.0, "peak_rss": 0, "cache": cold, "storage": (),
    }  # fmt: skip
    runs = (
        NodeRun("bare", status="failed", error="anonymous", withdrew=True, **row),
        NodeRun("stopped", status="cancelled", error="stopped: node busy failed", **row),
        NodeRun("busy", status="failed", error="throttled by the endpoint", **row),
    )
    stand_in_cluster(
        monkeypatch, lambda verb, path, sides, *_, **__: FleetResult(verb, path, sides, runs)
    )
    assert main(["fleet", "load", str(sharded_model)]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines()[-1] == "modelmon: node busy (h): throttled by the endpoint"
    assert "  h stopped  cancelled: stopped: node busy failed" in out.splitlines()
