"""``modelmon.cli``: the parser, the verbs it dispatches to, exit codes and import rules."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import modelmon.cli
from modelmon.cli.common import EPILOG, ExitCode, fail_on
from modelmon.core.errors import (
    ConfigError,
    LoadCancelled,
    LoadError,
    ModelFormatError,
    OptionsError,
)

CLI = Path(modelmon.cli.__file__).parent


def test_help_documents_exit_codes(modelmon) -> None:
    done = modelmon("--help")
    assert "exit codes" in done.stdout and "130 cancelled" in done.stdout


def test_version(modelmon) -> None:
    done = modelmon("--version")
    assert done.returncode == 0 and done.stdout.startswith("modelmon ")


def test_bad_file_is_one_line_and_exit_3(modelmon, tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 64)
    done = modelmon("load", str(bad))
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1 and str(bad) in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_every_exit_code_is_in_the_help_and_each_error_maps_to_one(capsys) -> None:
    for code in ExitCode:
        assert f"{code.value} " in EPILOG
    cases = [
        (ModelFormatError("m.safetensors", "truncated header"), ExitCode.BAD_MODEL),
        (OptionsError("workers must be ≥ 1"), ExitCode.USAGE),
        (ConfigError("m.toml: evidence.runs: must be a run count"), ExitCode.USAGE),
        (LoadError("worker 0 died"), ExitCode.LOAD_FAILED),
        (LoadCancelled(), ExitCode.CANCELLED),
        (KeyboardInterrupt(), ExitCode.CANCELLED),
    ]
    for error, code in cases:
        assert fail_on(error) is code
        line = capsys.readouterr().err
        assert line.count("\n") == 1 and line.startswith("modelmon: ")
        assert (str(error) or "cancelled") in line


def test_each_verb_is_the_module_named_after_it() -> None:
    parser = modelmon.cli.build_parser()
    names = [verb.VERB for verb in modelmon.cli.VERBS]
    assert len(set(names)) == len(names)
    for verb in modelmon.cli.VERBS:
        assert verb.__name__ == f"modelmon.cli.{verb.VERB}"
        assert callable(verb.add_parser) and callable(verb.run)
    assert parser.parse_args(["strategies"]).verb == "strategies"


def _imported(nodes: Iterable[ast.AST]) -> set[str]:
    """The modules these statements import (``from modelmon.cli import x``: modelmon.cli)."""
    modules = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


def test_verb_modules_import_no_other_verb_and_no_engine_at_module_level() -> None:
    """The import rule in modelmon/cli/__init__.py: no cycles, and `--version` stays light."""
    verbs = {verb.__name__ for verb in modelmon.cli.VERBS}
    light = {
        "modelmon.core.errors",
        "modelmon.core.options",
        "modelmon.core.output.json",
        "modelmon.core.measuring.limits",
    }
    for verb in modelmon.cli.VERBS:
        tree = ast.parse(Path(verb.__file__).read_text())
        anywhere = _imported(ast.walk(tree))
        assert not anywhere & (verbs - {verb.__name__}), f"{verb.__name__} imports another verb"
        assert "modelmon.cli" not in anywhere, f"{verb.__name__} imports modelmon.cli"
        # `if TYPE_CHECKING:` blocks are not module-level statements: only tree.body counts.
        engine = {m for m in _imported(tree.body) if m.split(".")[0] == "modelmon"}
        assert engine <= {"modelmon.cli.common", *light}, f"{verb.__name__}: import in run()"
    common = _imported(ast.parse((CLI / "common.py").read_text()).body)
    assert {m for m in common if m.split(".")[0] == "modelmon"} <= light
