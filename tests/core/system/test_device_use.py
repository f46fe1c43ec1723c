"""Runs on one device, machine-wide: a measurement that shared the device with another
modelmon run says so, naming it; what another user writes in the log is only ever a note."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.system import device_use

# A real load whose timed part the test holds open: at its first reads it says "loading" and
# waits for a line on stdin before it goes on collecting (its workers go on reading, then
# wait to send). Then it prints its result.
_HELD_LOAD = """
import json, sys
from modelmon.core.loading.messages import ReadBatch
from modelmon.core.loading.runner import LoadRun
from modelmon.core.options import LoadOptions

held = []

def on_message(message):
    if isinstance(message, ReadBatch) and not held:
        held.append(True)
        print("loading", flush=True)
        sys.stdin.readline()

options = LoadOptions(workers=1, threads=1, discard=True, cache="keep")
result = LoadRun(sys.argv[1], "sequential", options, on_message=on_message).run()
print(json.dumps(result.to_dict()), flush=True)
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shared")
    return write_safetensors_model(folder, layers=2, hidden=512, vocab=2048)


def test_two_concurrent_loads_each_name_the_other(model: Path) -> None:
    first = subprocess.Popen(
        [sys.executable, "-c", _HELD_LOAD, str(model)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert first.stdin is not None and first.stdout is not None
    try:
        assert first.stdout.readline().strip() == "loading"  # its timed part is open
        second = subprocess.run(
            [sys.executable, "-m", "modelmon", "load", str(model), "--cache", "keep", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        first.stdin.write("go on\n")
        first.stdin.flush()
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert second.returncode == 0, second.stderr
    theirs = json.loads(second.stdout)
    mine = json.loads(out)
    assert first.returncode == 0 and mine["status"] == "ok", err
    (other,) = mine["overlapped"]  # in the JSON as a field, and in the notes for people
    assert f"modelmon load {model} --cache keep --json" in other
    assert any(other in note for note in mine["notes"])
    (other,) = theirs["overlapped"]
    assert f"pid {first.pid} (" in other


def test_a_load_alone_on_its_device_has_no_such_note(model: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "modelmon", "load", str(model), "--cache", "keep", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    alone = json.loads(done.stdout)
    assert alone["overlapped"] == [] and not [n for n in alone["notes"] if "other modelmon" in n]


def test_what_another_user_wrote_in_a_log_is_only_text() -> None:
    """Lines of living runs are named, shortened and printable; anything else is skipped."""
    name = "block-test0"
    log = device_use.lock_dir() / f"modelmon-{name}.log"
    other = os.getppid()  # a living process that is not this one
    since = device_use.process_start(other)
    hostile = "rm -rf /\x1b[2J" + "x" * 500
    lines = [
        json.dumps({"event": "start", "pid": other, "since": since, "command": hostile}),
        "not json at all",
        json.dumps({"event": "start", "pid": "1", "since": 0, "command": "bad pid"}),
        json.dumps({"event": "start", "pid": 999999999, "since": 1, "command": "long dead"}),
    ]
    log.write_text("\n".join(lines) + "\n")
    with device_use.activity([name]) as activity:
        activity.mark()
        others = activity.others()
    # Only the line of a living process counts; it is shown as text, shortened, without the
    # escape sequence.
    assert [run.pid for run in others] == [other]
    (text,) = [run.text() for run in others]
    assert "\x1b" not in text and len(text) < 140
