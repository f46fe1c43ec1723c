"""Configurations as typed values, parsed once from words: a strategy with its options, or a
program (``cmd: ...``, ``engine: ...``), shown back, and turned into the command line and
environment a run uses; the one command grammar (``Command``)."""

from __future__ import annotations

import sys

import pytest

from modelmon.core import ENGINES, Command, ProgramConfig, StrategyConfig, parse_configuration
from modelmon.core.configuration import parse_engine, parse_program, program_kind
from modelmon.core.errors import OptionsError
from modelmon.core.options import LoadOptions


def test_a_command_is_split_as_a_shell_splits_it_and_shown_back() -> None:
    program = parse_program(
        """cmd: readahead=4MiB HF_HOME=/tmp/h python -c 'print("a b")' --model={path} {path}"""
    )
    assert program.kind == "cmd" and program.readahead == 4096
    assert program.command_words is not None
    assert program.command_words.env == (("HF_HOME", "/tmp/h"),)
    assert program.command("/m/x y") == ["python", "-c", 'print("a b")', "--model=/m/x y", "/m/x y"]
    assert parse_program(program.spec) == program
    assert parse_configuration(program.spec) == program


def test_a_strategy_and_a_program_are_told_apart_by_type_once_parsed() -> None:
    strategy = parse_configuration("sequential workers=4 chunk=16MiB")
    assert strategy == StrategyConfig("sequential", LoadOptions(workers=4, chunk=16 << 20))
    assert parse_configuration(strategy.spec) == strategy
    assert isinstance(parse_configuration("cmd: cat {path}"), ProgramConfig)
    assert isinstance(parse_configuration("engine: safetensors"), ProgramConfig)
    with pytest.raises(OptionsError, match="unknown option"):
        parse_configuration("sequential fast=yes")


def test_one_command_grammar_for_cmd_watch_and_the_app() -> None:
    typed = Command.parse("HF_HOME={path}/cache python load.py '{path}' --x 'a b'")
    given = Command.from_words(
        ["HF_HOME={path}/cache", "python", "load.py", "{path}", "--x", "a b"]
    )
    assert typed == given
    assert typed.argv_for("/m") == ["python", "load.py", "/m", "--x", "a b"]
    assert typed.env_for("/m") == {"HF_HOME": "/m/cache"}  # {path} in any word
    assert Command.parse(typed.text) == typed
    assert Command.parse("cat x | head $HOME").argv == ("cat", "x", "|", "head", "$HOME")
    with pytest.raises(OptionsError, match="NUL"):
        Command.from_words(["echo", "a\x00b"])
    with pytest.raises(OptionsError, match="name a model"):
        Command.parse("cat {path}").argv_for(None)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("cmd:", "needs a command"),
        ("cmd: FOO=1", "needs a command"),
        ("cmd: python 'unclosed", "quote as in a shell"),
        ("cmd: readahead=lots python x", "readahead must be"),
        ("engine: teleport", "unknown engine 'teleport'"),
        ("engine: llamacpp use_mmap=false", "has no knob 'use_mmap'"),
        ("engine: llamacpp load_mode=fast", "load_mode must be one of mmap, none, dio"),
        ("engine: transformers disable_mmap", "must look like knob=value"),
        ("engine:", "needs a loader's name"),
        ("sequential workers=4", "not a program configuration"),
    ],
)
def test_a_bad_program_spec_is_one_clear_line(text: str, said: str) -> None:
    with pytest.raises(OptionsError, match=said) as caught:
        parse_program(text)
    assert "\n" not in str(caught.value)


def test_an_engine_runs_its_child_with_the_knobs_given_and_its_environment() -> None:
    program = parse_engine("transformers disable_mmap=true HF_DEACTIVATE_ASYNC_LOAD=1")
    command = program.command("/models/llama")
    assert command[0] == sys.executable and command[1].endswith("loaders/child.py")
    assert command[2:] == ["transformers", "/models/llama", "disable_mmap=true"]
    assert program.environment() == {"HF_DEACTIVATE_ASYNC_LOAD": "1"}
    as_is = parse_engine("transformers")
    assert as_is.command("/m")[2:] == ["transformers", "/m"] and as_is.environment() == {}
    assert as_is.spec == "engine: transformers"


def test_each_variant_changes_one_knob_and_keeps_the_users_settings() -> None:
    safetensors = ENGINES["safetensors"]
    variants = safetensors.variants({"framework": "torch"})
    assert {"framework": "torch", "backend": "pread"} in variants
    assert {"framework": "torch", "backend": "read"} in variants
    assert all(v["framework"] == "torch" for v in variants)  # a setting, not tried
    program = parse_engine("safetensors framework=torch").with_knobs(variants[-1])
    assert program.spec == "engine: safetensors framework=torch backend=read"


def test_snippets_say_the_setting_in_the_engines_own_terms() -> None:
    llama = ENGINES["llamacpp"]
    none = llama.settings({"load_mode": "none"})
    assert llama.snippet(none) == (
        "from llama_cpp import Llama; llm = Llama(model_path=PATH, use_mmap=False)"
    )
    assert dict(llama.also)["llama.cpp"](none) == "llama-server -m PATH --load-mode none"
    transformers = ENGINES["transformers"]
    both = transformers.settings({"disable_mmap": "true", "HF_DEACTIVATE_ASYNC_LOAD": "1"})
    assert transformers.snippet(both) == (
        "import os; os.environ.update({'HF_DEACTIVATE_ASYNC_LOAD': '1'}); from transformers "
        "import AutoModelForCausalLM; model = AutoModelForCausalLM.from_pretrained(PATH, "
        "disable_mmap=True)"
    )
    vllm = ENGINES["vllm"]
    assert vllm.unavailable() is not None and vllm.stand_in == "safetensors"
    assert vllm.snippet(vllm.settings({"backend": "read"})).endswith("load-strategy eager")


@pytest.mark.parametrize(
    ("text", "program"),
    [("cmd: x", True), ("  Engine: llamacpp", True), ("sequential", False), ("cmdline", False)],
)
def test_what_is_a_program(text: str, program: bool) -> None:
    assert (program_kind(text) is not None) is program
