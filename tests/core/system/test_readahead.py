"""Readahead as a run's knob, on a loop device of the test's own (never the machine's disk):
set for the run, restored on every way out, and after a kill -9 by the next run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from modelmon.core.errors import ReadaheadError
from modelmon.core.loading.runner import run_load
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions, parse_spec
from modelmon.core.system import device_use, readahead
from modelmon.core.system import readahead_records as records
from modelmon.core.system.storage import read_int


@pytest.fixture(autouse=True)
def _own_state(own_state: Path) -> Path:
    return own_state


def test_the_option_parses_in_kib_and_units() -> None:
    assert parse_spec("mmap readahead=4096")[1].readahead == 4096
    assert parse_spec("mmap readahead=4MiB")[1].readahead == 4096
    assert parse_spec("mmap readahead=none")[1].readahead is None
    assert "readahead" not in LoadOptions().to_dict()  # TOML has no null
    with pytest.raises(ValueError, match="readahead"):
        LoadOptions(readahead=-1)


def test_locate_finds_the_loop_device_and_its_permanent_commands(loop_disk: Path) -> None:
    knob = readahead.locate(loop_disk)
    assert knob is not None and knob.kind == "block" and knob.device.startswith("loop")
    assert knob.read_kb() == read_int(f"/sys/block/{knob.device}/queue/read_ahead_kb")
    setra, udev = knob.permanent(4096)
    assert setra == f"sudo blockdev --setra 8192 /dev/{knob.device}"  # 512-byte sectors
    assert f'KERNEL=="{knob.device}"' in udev and 'ATTR{queue/read_ahead_kb}="4096"' in udev


def test_set_for_the_run_and_restored_also_on_an_error(loop_disk: Path) -> None:
    knob = readahead.locate(loop_disk)
    assert knob is not None
    before = knob.read_kb()
    target = 1024 if before != 1024 else 2048
    with readahead.for_run([loop_disk], target) as notes:
        assert knob.read_kb() == target
        assert any("set to" in note for note in notes)
    assert knob.read_kb() == before
    with pytest.raises(RuntimeError), readahead.for_run([loop_disk], target):
        assert knob.read_kb() == target
        raise RuntimeError("a worker crashed")
    assert knob.read_kb() == before


def test_never_changed_while_another_run_uses_the_device(loop_disk: Path) -> None:
    knob = readahead.locate(loop_disk)
    assert knob is not None
    before = knob.read_kb()
    busy = pytest.raises(ReadaheadError, match="another modelmon run")
    with readahead.for_run([loop_disk], None):  # a plain run on the same device
        with busy, readahead.for_run([loop_disk], before + 128):
            pass
        assert knob.read_kb() == before
    busy = pytest.raises(ReadaheadError, match="another modelmon run")
    with readahead.for_run([loop_disk], before + 128), busy, readahead.for_run([loop_disk], 256):
        pass
    assert knob.read_kb() == before


def test_refused_in_one_line_where_there_is_no_setting(tmp_path: Path) -> None:
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    with pytest.raises(ReadaheadError) as caught, readahead.for_run(["/dev/shm"], 4096):
        pass
    assert "\n" not in str(caught.value) and "readahead" in str(caught.value)


def test_a_load_with_the_option_sets_and_restores(loop_disk: Path) -> None:
    model = write_safetensors_model(loop_disk, layers=2, hidden=64, vocab=256)
    knob = readahead.locate(model)
    assert knob is not None
    before = knob.read_kb()
    result = run_load(model, "sequential", LoadOptions(readahead=before + 512, threads=1))
    assert result.status == "ok"
    assert result.options["readahead"] == before + 512
    assert any(f"set to {before + 512} KiB" in note for note in result.notes)
    assert knob.read_kb() == before


_HOLDER = """
import signal, sys
from modelmon.core.system import device_use, readahead
from modelmon.core.system import readahead_records as records
# Signals as in a terminal: a shell's background job starts with SIGINT ignored and a run
# under nohup with SIGHUP ignored, and a process keeps what it inherits (an ignored SIGHUP
# is the user's choice that modelmon honours: restored, then not ended).
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGHUP, signal.SIG_DFL)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
with readahead.for_run([sys.argv[1]], int(sys.argv[2])):
    print("set", flush=True)
    sys.stdin.read()
"""


def _holder(folder: Path, kb: int, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(folder), str(kb)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # Ctrl+C's traceback
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "set"  # waits for the state, not for time
    return child


def _finish(child: subprocess.Popen[str]) -> int:
    child.wait(timeout=30)
    for stream in (child.stdin, child.stdout):
        if stream is not None:
            stream.close()
    return child.returncode


def test_kill_9_mid_run_is_restored_by_the_next_start(loop_disk: Path) -> None:
    knob = readahead.locate(loop_disk)
    assert knob is not None
    before = knob.read_kb()
    child = _holder(loop_disk, before + 384)
    assert knob.read_kb() == before + 384
    child.kill()
    assert _finish(child) == -signal.SIGKILL
    assert knob.read_kb() == before + 384  # nothing could restore it...
    with readahead.for_run([loop_disk], None) as notes:  # ...until the next run starts
        assert knob.read_kb() == before
    assert any("a run had died" in note for note in notes)
    assert readahead.recover() == []  # the record is spent


def test_sigterm_restores_before_the_process_ends(loop_disk: Path) -> None:
    knob = readahead.locate(loop_disk)
    assert knob is not None
    before = knob.read_kb()
    child = _holder(loop_disk, before + 640)
    child.send_signal(signal.SIGTERM)
    assert _finish(child) == -signal.SIGTERM
    assert knob.read_kb() == before
    assert readahead.recover() == []


def test_a_fuse_mount_has_its_backing_device_knob(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from benchmarks.envs import fuse_mount, fuse_unavailable

    reason = fuse_unavailable()
    if reason or os.geteuid() != 0:
        pytest.skip(reason or "needs root to write a bdi's read_ahead_kb")
    source = tmp_path / "source"
    write_safetensors_model(source, layers=1, hidden=32, vocab=64)
    with fuse_mount(source, tmp_path / "mnt") as mounted:
        knob = readahead.locate(mounted / "model.safetensors")
        assert knob is not None and knob.kind == "bdi"
        assert knob.sysfs == f"/sys/class/bdi/{knob.device}/read_ahead_kb"
        before = knob.read_kb()
        with readahead.for_run([mounted / "model.safetensors"], before + 1024):
            assert knob.read_kb() == before + 1024
        assert knob.read_kb() == before
        write, mount_option = knob.permanent(4096)
        assert write == f"echo 4096 | sudo tee {knob.sysfs}"
        assert "max_readahead=4194304" in mount_option and "--max-read-ahead 4096Ki" in mount_option


def test_ctrl_c_restores_on_the_way_out(loop_disk: Path) -> None:
    knob = readahead.locate(loop_disk)
    assert knob is not None
    before = knob.read_kb()
    child = _holder(loop_disk, before + 896)
    child.send_signal(signal.SIGINT)  # KeyboardInterrupt unwinds through for_run
    assert _finish(child) != 0
    assert knob.read_kb() == before
    assert readahead.recover() == []


def test_sighup_restores_before_the_process_ends(loop_disk: Path) -> None:
    """A closed terminal (SIGHUP) ends the run as SIGTERM does: the value is put back first."""
    knob = readahead.locate(loop_disk)
    assert knob is not None
    before = knob.read_kb()
    child = _holder(loop_disk, before + 768)
    child.send_signal(signal.SIGHUP)
    assert _finish(child) == -signal.SIGHUP
    assert knob.read_kb() == before
    assert readahead.recover() == []


def test_runs_with_other_homes_meet_on_one_device_lock(
    loop_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two users, or a user and a service: different HOMEs, one device. The second run must
    not change the value the first set (each would put back the other's value at its end)."""
    knob = readahead.locate(loop_disk)
    assert knob is not None
    before = knob.read_kb()
    home = tmp_path / "service"
    first = _holder(
        loop_disk,
        before + 1536,
        {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / "state")},
    )
    try:
        monkeypatch.setenv("HOME", str(tmp_path / "user"))
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "user" / "state"))
        busy = pytest.raises(ReadaheadError, match="another modelmon run is using it")
        with busy, readahead.for_run([loop_disk], before + 512):
            pass
        assert knob.read_kb() == before + 1536  # the first run's value, untouched
    finally:
        assert first.stdin is not None
        first.stdin.close()  # the first run ends
        assert _finish(first) == 0
    assert knob.read_kb() == before


def _plant(knob: readahead.ReadaheadKnob, data: dict[str, object], mode: int = 0o600) -> Path:
    """A restore record as a run that died would have left it (or someone else wrote it)."""
    folder = records.directory()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"{knob.lock_name}.json"
    path.write_text(json.dumps(data))
    path.chmod(mode)
    return path


def test_a_restore_record_is_applied_only_when_no_one_else_could_have_written_it(
    loop_disk: Path,
) -> None:
    knob = readahead.locate(loop_disk)
    assert knob is not None
    before = knob.read_kb()
    changed = before + 256
    with open("/proc/sys/kernel/random/boot_id") as boot_file:
        boot = boot_file.read().strip()
    good = {"sysfs": knob.sysfs, "previous": before, "set": changed, "pid": 1, "boot": boot}
    other_file = f"/sys/block/{knob.device}/queue/nr_requests"  # writable, not the readahead
    untrusted: list[tuple[str, dict[str, object], int, int | None]] = [
        ("writable by others", good, 0o666, None),
        ("another user's", good, 0o600, 65534),
        ("not a readahead file", {**good, "sysfs": other_file}, 0o600, None),
        ("from another boot", {**good, "boot": "0" * 32}, 0o600, None),
        ("not a number", {**good, "previous": "128; reboot"}, 0o600, None),
    ]
    requests = Path(other_file).read_text()
    try:
        for why, data, mode, owner in untrusted:
            readahead._write(knob.sysfs, changed)  # as a run killed with kill -9 left it
            path = _plant(knob, data, mode)
            if owner is not None:
                os.chown(path, owner, owner)
            assert readahead.recover() == [], why
            assert knob.read_kb() == changed, why
            assert not path.exists(), why  # never to be applied: not kept either
        _plant(knob, good)
        assert any("a run had died" in note for note in readahead.recover())
        assert knob.read_kb() == before
        assert records.names() == []  # spent
    finally:
        readahead._write(knob.sysfs, before)
    assert Path(other_file).read_text() == requests


def test_a_records_folder_others_can_write_is_not_trusted(loop_disk: Path) -> None:
    knob = readahead.locate(loop_disk)
    assert knob is not None
    before = knob.read_kb()
    folder = records.directory()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o777)
    try:
        refused = pytest.raises(ReadaheadError, match="only this user can write")
        with refused, readahead.for_run([loop_disk], before + 128):
            pass
        assert records.names() == [] and knob.read_kb() == before
    finally:
        folder.chmod(0o700)


def test_a_fifo_planted_as_the_device_lock_or_log_hangs_nothing(loop_disk: Path) -> None:
    """Anyone can create files in the lock folder: a FIFO under a device's names must
    neither hang a run nor be taken for a lock."""
    knob = readahead.locate(loop_disk)
    assert knob is not None
    before = knob.read_kb()
    for suffix in ("lock", "log"):
        os.mkfifo(device_use.lock_dir() / f"modelmon-{knob.lock_name}.{suffix}")
    refused = pytest.raises(ReadaheadError, match="not a regular file")
    with refused, readahead.for_run([loop_disk], before + 128):
        pass
    assert knob.read_kb() == before
    model = write_safetensors_model(loop_disk, layers=1, hidden=64, vocab=256)
    assert run_load(model, "sequential", LoadOptions(threads=1)).status == "ok"
