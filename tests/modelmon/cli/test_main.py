"""``modelmon.cli``: the parser, the verbs it dispatches to, exit codes and import rules."""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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


# What building the whole parser may load of the engine: errors, options, limits, the model
# reference syntax (with the stores it names and the file reading they use), strict JSON.
LIGHT_ENGINE = {
    "modelmon.core.errors",
    "modelmon.core.faces",
    "modelmon.core.options",
    "modelmon.core.limits",
    "modelmon.core.model",
    "modelmon.core.model.references",
    "modelmon.core.model.stores",
    "modelmon.core.system",
    "modelmon.core.system.files",
    "modelmon.core.system.libc",
    "modelmon.core.output",
    "modelmon.core.output.json",
}
BUILD_PARSER = """
import json, sys
import modelmon.cli
modelmon.cli.build_parser()
print(json.dumps(sorted(m for m in sys.modules if m.startswith("modelmon.core."))))
"""


def test_verb_modules_import_no_other_verb_and_the_parser_loads_little_of_the_engine() -> None:
    """The import rule in modelmon/cli/__init__.py: no cycles, and `--version` stays light."""
    verbs = {verb.__name__ for verb in modelmon.cli.VERBS}
    for verb in modelmon.cli.VERBS:
        tree = ast.parse(Path(verb.__file__).read_text())
        anywhere = _imported(ast.walk(tree))
        assert not anywhere & (verbs - {verb.__name__}), f"{verb.__name__} imports another verb"
        assert "modelmon.cli" not in anywhere, f"{verb.__name__} imports modelmon.cli"
    done = subprocess.run(
        [sys.executable, "-c", BUILD_PARSER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert loaded <= LIGHT_ENGINE, f"import these in the verb's run(): {loaded - LIGHT_ENGINE}"


def _verb_parsers() -> Iterable[tuple[str, argparse.ArgumentParser]]:
    """("load", its parser) for every verb, and ("fleet load", …) for the fleet's actions."""

    def walk(parser: argparse.ArgumentParser, words: str) -> Iterable[tuple[str, Any]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield f"{words} {name}".strip(), sub
                    yield from walk(sub, f"{words} {name}")

    return walk(modelmon.cli.build_parser(), "")


def test_each_verb_s_help_shows_its_own_examples_and_what_path_may_be() -> None:
    seen = set()
    for words, parser in _verb_parsers():
        text = parser.format_help()
        seen.add(words)
        assert EPILOG not in text, f"{words} --help repeats modelmon's examples"
        examples = text.split("examples:\n", 1)[1].split("\n\nexit codes:", 1)[0]
        first = examples.splitlines()[0].split()
        assert first[: 1 + len(words.split())] == ["modelmon", *words.split()], (words, first)
        assert "exit codes:" in text and "141 stdout closed" in text
        for action in parser._actions:
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{words}: {action.dest} has no help"
                if action.dest == "path":
                    assert all(form in action.help for form in (".gguf", "index.json", "hf:"))
    assert {"load", "bench", "recommend", "inspect", "fleet load", "fleet bench"} <= seen


def test_every_help_renders(modelmon) -> None:
    """argparse expands %-formats in help texts when it prints them: each verb's prints."""
    for words, _ in _verb_parsers():
        done = modelmon(*words.split(), "--help")
        assert done.returncode == 0 and done.stderr == "" and "usage:" in done.stdout, words
