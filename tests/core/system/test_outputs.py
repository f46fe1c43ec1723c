"""The one guard in front of every write: inputs under any name, special files, standard output,
files and folders that cannot take a save; and where results go when a save fails anyway."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelmon.core import write_gguf_model, write_safetensors_model
from modelmon.core.errors import ModelmonError
from modelmon.core.system.outputs import check_output, free_name, state_folder, write_or_keep


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"weights")
    return path


def refused(path: str | Path, inputs: tuple[Path, ...] = (), says: str = "") -> str:
    with pytest.raises(ModelmonError) as caught:
        check_output(path, inputs)
    message = str(caught.value)
    assert "\n" not in message and says in message, message
    return message


def entries(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def test_an_input_is_refused_under_any_name(model: Path, tmp_path: Path) -> None:
    (tmp_path / "link.toml").symlink_to(model)
    os.link(model, tmp_path / "hard.toml")
    descriptor = os.open(model, os.O_RDONLY)
    try:
        names = [model, tmp_path / "link.toml", tmp_path / "hard.toml"]
        for name in [*names, f"/proc/self/fd/{descriptor}", f"/dev/fd/{descriptor}"]:
            refused(name, (model,), says="is the input")
    finally:
        os.close(descriptor)
    assert model.read_bytes() == b"weights"


@pytest.mark.skipif(os.geteuid() != 0, reason="a bind mount needs root")
def test_an_input_bind_mounted_elsewhere_is_refused(model: Path, tmp_path: Path) -> None:
    mount_point = tmp_path / "elsewhere.toml"
    mount_point.write_bytes(b"")
    subprocess.run(["mount", "--bind", str(model), str(mount_point)], check=True)
    try:
        refused(mount_point, (model,), says="is the input")
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def test_special_files_are_refused_and_left_as_they_are(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "socket.json"))
    try:
        for name, kind in (
            (fifo, "a FIFO"),
            (tmp_path / "socket.json", "a socket"),
            ("/dev/null", "a character device"),
        ):  # says which it is
            refused(name, says=f"not a regular file ({kind})")
    finally:
        listening.close()
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    refused(tmp_path, says="is a directory")
    refused(f"{tmp_path}/new/", says="names a folder")
    refused("", says="empty")


STDOUT_PROBE = """
import sys
from modelmon.core.system.outputs import check_output
output = check_output(sys.argv[1], ())
assert output.is_stdout, output
print("before", flush=True)
output.write(b"payload\\n")
"""


@pytest.mark.parametrize("name", ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_standard_output_by_any_name_is_written_as_standard_output(
    tmp_path: Path, name: str
) -> None:
    """With stdout redirected to a regular file, as ``modelmon ... -o /dev/stdout > f`` is:
    the bytes go through the descriptor, and /dev/stdout stays a symlink."""
    redirected = tmp_path / "out.txt"
    with open(redirected, "wb") as stdout:
        subprocess.run([sys.executable, "-c", STDOUT_PROBE, name], stdout=stdout, check=True)
    assert redirected.read_bytes() == b"before\npayload\n"
    assert os.path.islink("/dev/stdout")
    assert entries(tmp_path) == ["out.txt"]


def test_another_descriptor_of_modelmon_is_not_a_file(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    with open(log, "w") as handle:
        refused(f"/proc/self/fd/{handle.fileno()}", says=f"descriptor {handle.fileno()}")
    assert log.read_text() == ""


def test_a_folder_that_cannot_take_a_file_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    refused(blocker / "out.toml", says="cannot write")
    refused(tmp_path / "gone" / "out.toml", says="cannot write")
    assert entries(tmp_path) == ["a-file"]


@pytest.fixture
def models(tmp_path: Path) -> dict[str, Path]:
    """A copy of each kind of model file under a name that is not a model's."""
    made = tmp_path / "made"
    index = write_safetensors_model(made / "sharded", layers=2, hidden=32, vocab=64, shards=2)
    sources = {
        "copy.toml": write_safetensors_model(made / "single", layers=1, hidden=32, vocab=64),
        "shard.csv": next(index.parent.glob("*-00001-*")),
        "copy.json": index,
        "copy.png": write_gguf_model(made / "m.gguf", layers=1, hidden=32, vocab=64),
    }
    copies = {}
    for name, source in sources.items():
        copies[name] = tmp_path / name
        copies[name].write_bytes(source.read_bytes())
    return copies


def test_a_model_is_refused_whatever_its_name_unless_models_may_be_replaced(
    models: dict[str, Path], tmp_path: Path
) -> None:
    """Not an input of the run: a copy of a model, the file a local bucket serves."""
    before = {name: path.read_bytes() for name, path in models.items()}
    for name, kind in (
        ("copy.toml", "a safetensors model"),
        ("shard.csv", "a safetensors model"),
        ("copy.json", "a safetensors shard index"),
        ("copy.png", "a GGUF model"),
    ):
        message = refused(models[name], says=f"is {kind}")
        assert "name another file" in message and "--" not in message, message
        with pytest.raises(ModelmonError, match=r"or add --overwrite-model to replace it$"):
            check_output(models[name], override="--overwrite-model")
        link = tmp_path / f"link-to-{name}"
        link.symlink_to(models[name])
        refused(link, says=f"is {kind}")
    assert {name: path.read_bytes() for name, path in models.items()} == before
    check_output(models["copy.toml"], replace_models=True).write(b"asked for\n")
    assert models["copy.toml"].read_bytes() == b"asked for\n"
    # An input stays refused, models or not.
    refused(models["copy.json"], (models["copy.json"],), says="is the input")
    with pytest.raises(ModelmonError, match="is the input"):
        check_output(models["copy.json"], (models["copy.json"],), replace_models=True)


def test_a_target_that_became_a_model_keeps_the_report_beside_it_under_its_own_name(
    models: dict[str, Path], tmp_path: Path, own_state: Path
) -> None:
    """Kept as the report it is (modelmon.toml), not as copy-2.png, which would pass for
    a model's name."""
    target = models["copy.png"]
    before = target.read_bytes()
    saved = write_or_keep(target, (), toml_for, default_name="modelmon.toml")
    assert saved.failure is not None and "is a GGUF model" in saved.failure
    assert saved.where == str(tmp_path / "modelmon.toml") and saved.name == "modelmon.toml"
    # It names itself by the whole path it was kept under: pasted anywhere, it is found.
    assert saved.named == str(tmp_path / "modelmon.toml")
    assert (tmp_path / "modelmon.toml").read_bytes() == toml_for(saved.named)
    assert target.read_bytes() == before
    forced = write_or_keep(target, (), toml_for, replace_models=True)
    assert forced.failure is None and target.read_bytes() == toml_for(str(target))


def test_a_symlinked_target_is_written_through_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text("old")
    (tmp_path / "link.toml").symlink_to(real)
    check_output(tmp_path / "link.toml").write(b"new")
    assert (tmp_path / "link.toml").is_symlink() and real.read_text() == "new"


# --- attributes and room, on a real ext4 (chattr works there, and a disk can be filled) -------


def chattr(flags: str, path: Path) -> None:
    subprocess.run(["chattr", flags, str(path)], check=True)


@contextlib.contextmanager
def attribute(flags: str, path: Path) -> Iterator[None]:
    chattr(f"+{flags}", path)
    try:
        yield
    finally:
        chattr(f"-{flags}", path)


def fill(folder: Path) -> None:
    """Fill the filesystem of ``folder`` (as root: the reserved blocks too)."""
    with contextlib.suppress(OSError), open(folder / "filler", "wb") as filler:
        while True:
            filler.write(b"\0" * (1 << 20))
            filler.flush()
            os.fsync(filler.fileno())
    with contextlib.suppress(OSError), open(folder / "filler-tail", "wb") as tail:
        while True:
            tail.write(b"\0" * 4096)
            tail.flush()
            os.fsync(tail.fileno())


def test_immutable_and_append_only_targets_and_folders_are_refused(loop_disk: Path) -> None:
    folder = loop_disk / "out"
    folder.mkdir()
    target = folder / "modelmon.toml"
    target.write_text("old")
    for flags in ("i", "a"):
        with attribute(flags, target):
            refused(target, says="chattr +" + flags)
        with attribute(flags, folder):
            refused(target, says="chattr +" + flags)
            refused(folder / "new.toml", says="chattr +" + flags)
    assert entries(folder) == ["modelmon.toml"] and target.read_text() == "old"


def test_a_full_disk_is_refused_before_any_work(loop_disk: Path) -> None:
    fill(loop_disk)
    refused(loop_disk / "modelmon.toml", says="No space left")
    assert "modelmon.toml" not in entries(loop_disk)


# --- when a save fails after the work: kept beside, else in the state folder -----------------


def toml_for(name: str) -> bytes:
    return f'config = "{name}"\n'.encode()


def test_a_target_that_turned_immutable_is_kept_beside_it(loop_disk: Path, own_state: Path) -> None:
    target = loop_disk / "modelmon.toml"
    target.write_text("old")
    with attribute("i", target):
        saved = write_or_keep(target, (), toml_for)
    assert saved.failure is not None and "chattr +i" in saved.failure
    assert saved.where == str(loop_disk / "modelmon-2.toml") and saved.name == "modelmon-2.toml"
    assert (loop_disk / "modelmon-2.toml").read_bytes() == toml_for(
        str(loop_disk / "modelmon-2.toml")
    )
    assert target.read_text() == "old"
    assert not state_folder().exists()


def test_a_folder_gone_or_full_keeps_it_in_the_state_folder(
    loop_disk: Path, tmp_path: Path, own_state: Path
) -> None:
    gone = tmp_path / "gone"
    saved = write_or_keep(gone / "modelmon.toml", (), toml_for)
    assert saved.failure is not None and not gone.exists()  # never made again
    assert saved.where == str(state_folder() / "modelmon.toml")
    fill(loop_disk)
    again = write_or_keep(loop_disk / "modelmon.toml", (), toml_for)
    assert again.failure is not None and "No space left" in again.failure
    assert again.where == str(state_folder() / "modelmon-2.toml")
    assert state_folder().is_relative_to(own_state)
    assert entries(state_folder()) == ["modelmon-2.toml", "modelmon.toml"]
    assert "modelmon.toml" not in entries(loop_disk)


def test_nowhere_to_keep_it_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))  # a file where the folder would be
    saved = write_or_keep(tmp_path / "gone" / "x.csv", (), lambda _: b"rows")
    assert saved.where is None and saved.failure is not None
    assert entries(tmp_path) == ["a-file"]


def test_free_names_number_before_the_suffix(tmp_path: Path) -> None:
    assert free_name(tmp_path, "modelmon.toml") == tmp_path / "modelmon.toml"
    (tmp_path / "modelmon.toml").write_text("")
    (tmp_path / "modelmon-2.toml").symlink_to("nowhere")  # a dangling link is taken too
    assert free_name(tmp_path, "modelmon.toml") == tmp_path / "modelmon-3.toml"


def test_a_current_folder_that_is_gone_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_state: Path
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    refused("modelmon.toml", says="cannot write there")
    saved = write_or_keep("modelmon.toml", (), toml_for)
    assert saved.where == str(state_folder() / "modelmon.toml")


def test_a_payload_names_the_whole_path_it_is_written_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-o r.toml`` in a folder, ``-o /abs/r.toml``: the config's paste line names the file
    from the root, so that it is found from any folder (it named 'r.toml' before)."""
    monkeypatch.chdir(tmp_path)
    saved = write_or_keep("r.toml", (), toml_for)
    assert saved.named == str(tmp_path / "r.toml") and saved.where == "r.toml"
    assert (tmp_path / "r.toml").read_bytes() == toml_for(str(tmp_path / "r.toml"))
    elsewhere = tmp_path / "out"
    elsewhere.mkdir()
    saved = write_or_keep(elsewhere / "r.toml", (), toml_for)
    assert (elsewhere / "r.toml").read_bytes() == toml_for(str(elsewhere / "r.toml"))


def test_everything_modelmon_keeps_is_under_one_state_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Results it could not write where asked, the app's kept answers and crash log: one
    folder, ``$XDG_STATE_HOME/modelmon`` (``~/.local/state/modelmon`` without it)."""
    from modelmon.core.system import kept_answer_path, state_home
    from modelmon.core.system.outputs import state_folder
    from modelmon.gui.crash_log import crash_log_path

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    home = tmp_path / "modelmon"
    assert state_home() == home
    assert state_folder().parent == home and crash_log_path().parent == home
    assert kept_answer_path("m").parent == home / "recommendations"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert state_home() == tmp_path / "user" / ".local" / "state" / "modelmon"
