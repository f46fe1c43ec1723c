"""A watch's arguments that no program can be started with (a NUL byte in a command word, in
an environment variable, in a model's path) are refused in one typed line as the watch is
made, before anything runs (WatchError: the CLI's "could not be started"; a model's path,
ModelFormatError as everywhere): never a ValueError from deep in subprocess or os."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from modelmon.core import Watch, open_model, read_config
from modelmon.core.errors import ModelFormatError, ModelmonError, WatchError
from modelmon.core.system import check_output, write_or_keep
from modelmon.core.system.outputs import state_folder

TRUE = [sys.executable, "-c", "pass"]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"command": ["a\x00b"]}, "cannot run 'a\\x00b': its word 1, 'a\\x00b', holds a NUL"),
        ({"command": [*TRUE, "--model", "m\x00"]}, "its word 5, 'm\\x00', holds a NUL byte"),
        ({"command": TRUE, "env": {"HOME": "/x\x00y"}}, "variable HOME: its value holds a NUL"),
        ({"command": TRUE, "env": {"A\x00B": "1"}}, "name 'A\\x00B'"),
        ({"command": TRUE, "env": {"A=B": "1"}}, "name 'A=B'"),
        ({"command": TRUE, "env": {"": "1"}}, "name ''"),
        ({"command": "echo hi"}, "cannot run 'echo hi': a command is a list of words"),
        ({"command": "a\x00b"}, "a command is a list of words"),
        ({"command": [*TRUE, 3]}, "its word 4 is int 3, not a string or a path"),
    ],
)
def test_a_command_no_program_can_take_is_refused_as_the_watch_is_made(
    arguments: dict[str, object], says: str
) -> None:
    with pytest.raises(WatchError) as refused:
        Watch(**arguments)  # type: ignore[arg-type]
    message = str(refused.value)
    assert says in message and "\n" not in message and "\x00" not in message, message


def test_a_model_path_with_a_nul_byte_is_one_line_wherever_it_is_given(
    small_model: Path,
) -> None:
    named = str(small_model) + "\x00.safetensors"
    makers: list[Callable[[], object]] = [
        lambda: Watch(TRUE, model=named),
        lambda: Watch(TRUE, model=[str(small_model), named]),
        lambda: open_model(named),
    ]
    for make in makers:
        with pytest.raises(ModelFormatError, match="a path cannot hold a NUL byte"):
            make()
    with pytest.raises(ModelmonError, match="a path cannot hold a NUL byte"):
        read_config("modelmon\x00.toml")


def test_an_output_path_with_a_nul_byte_is_refused_and_a_result_kept(own_state: Path) -> None:
    with pytest.raises(ModelmonError, match="a path cannot hold a NUL byte"):
        check_output("out\x00.toml")
    saved = write_or_keep("out\x00.toml", (), lambda name: name.encode(), default_name="m.toml")
    assert saved.failure is not None and "NUL byte" in saved.failure
    assert saved.where == str(state_folder() / "m.toml")
    assert (state_folder() / "m.toml").read_bytes() == str(state_folder() / "m.toml").encode()
