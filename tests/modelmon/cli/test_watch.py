"""``modelmon watch``: JSON and words, one line and a documented exit code for each way a
watched command can go wrong, Ctrl+C, and a server stopped once quiet."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from modelmon.core import write_safetensors_model


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(
        tmp_path_factory.mktemp("cli-watch"), layers=2, hidden=256, vocab=2048, seed=3
    )


def test_watch_json(modelmon, model: Path) -> None:
    # The reader of the pipe starts late: cat waits on it, the load lasts samples long.
    done = modelmon(
        "watch", "--json", "--samples", "--interval-ms", "10", "--",
        "sh", "-c", f"cat {model} | (sleep 0.2; cat > /dev/null)",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["schema_version"] >= 1 and data["status"] == "exited"
    assert data["command"][:2] == ["sh", "-c"] and data["exit_code"] == 0
    size = model.stat().st_size
    assert data["bytes_read"] == size and data["model_bytes"] == size
    assert data["files"][0]["path"] == str(model.resolve()) and data["files"][0]["named"]
    assert data["cache"]["cold"] is True and data["files"][0]["resident_before"] == 0.0
    assert data["wall_seconds"] > 0 and data["findings"] == []
    assert {p["command"].split()[0] for p in data["processes"]} >= {"sh"}
    assert sum(data["samples"]["arrivals"]["length"]) == size


def test_watch_words_and_the_commands_own_output(modelmon, model: Path) -> None:
    command = f"cat {model} | (sleep 0.2; wc -c)"
    done = modelmon("watch", "--interval-ms", "10", "--", "sh", "-c", command)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].strip() == str(model.stat().st_size)  # wc's own line
    assert "watched:  sh -c" in done.stdout and "arrived:" in done.stdout


@pytest.mark.parametrize(
    ("command", "code", "words"),
    [
        (["sh", "-c", "exit 3"], 5, "exited with 3"),
        (["sh", "-c", "kill -9 $$"], 5, "killed by SIGKILL"),
        (["/nonexistent/loader"], 5, "cannot run '/nonexistent/loader'"),
        ([sys.executable, "-c", "import time; time.sleep(0.3)"], 6, "never opened or mapped"),
        (["true"], 7, "before the first sample"),
    ],
)
def test_each_way_a_watch_ends_badly_is_one_line_and_a_code(
    modelmon, command: list[str], code: int, words: str
) -> None:
    interval = "2000" if code == 7 else "50"
    done = modelmon("watch", "--interval-ms", interval, "--", *command)
    assert done.returncode == code, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("modelmon:")]
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_usage_errors(modelmon, model: Path) -> None:
    assert modelmon("watch").returncode == 2
    assert modelmon("watch", "--pid", "1", "--", "true").returncode == 2
    done = modelmon("watch", "--pid", str(os.getpid()), "--cache", "cold")
    assert done.returncode == 2 and "--cache applies to a command" in done.stderr


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_ctrl_c_stops_the_command_and_leaves_nothing(modelmon_argv: list[str]) -> None:
    # The command starts a child of its own in another session: it is stopped too.
    script = (
        "import subprocess, time\n"
        "subprocess.Popen(['sleep', '60'], start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen(
        # No sample before Ctrl+C: the stop itself must find the child.
        [
            *modelmon_argv,
            "watch",
            "--json",
            "--interval-ms",
            "5000",
            "--",
            sys.executable,
            "-c",
            script,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watched: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 30
        while "sleep" not in [p.name() for p in watched] and time.monotonic() < deadline:
            time.sleep(0.05)
            watched = _descendants(process.pid)
        assert "sleep" in [p.name() for p in watched]
        os.kill(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=30)
        assert process.returncode == 130, err
        assert "cancelled" in err and json.loads(out)["status"] == "cancelled"
        left = [p for p in watched if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert not left, f"left behind: {left}"
    finally:
        for child in watched:  # whatever the outcome, this test leaves nothing running
            with contextlib.suppress(psutil.Error):
                child.kill()
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_quiet_ends_the_watch_of_a_server_that_loaded(modelmon, model: Path) -> None:
    server = (
        "import sys, time\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "print('loaded', flush=True)\n"
        "time.sleep(120)\n"
    )
    started = time.monotonic()
    done = modelmon(
        "watch", "--json", "--quiet", "1", "--interval-ms", "20", "--",
        sys.executable, "-c", server, str(model),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60
    data = json.loads(done.stdout)
    assert data["status"] == "stopped" and data["ended_by"] == "quiet"
    assert data["bytes_read"] == model.stat().st_size
    assert data["quiet_s"] is not None and data["quiet_s"] <= data["wall_seconds"]
    assert any("stopped the command (SIGTERM)" in note for note in data["notes"])
    assert "loaded" in done.stderr  # the command's stdout went to stderr, next to the JSON


def test_compare_sets_this_storages_ceilings_next_to_the_loader(modelmon, model: Path) -> None:
    command = f"cat {model} | (sleep 0.1; cat > /dev/null)"
    done = modelmon("watch", "--compare", "--interval-ms", "10", "--", "sh", "-c", command)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("compare:")]
    *plain, bound = lines
    assert [line.split(";")[1].split()[0] for line in plain] == [
        "sequential_read",
        "parallel_read",
        "storage",
        "memory_fill",
    ]
    assert all("your loader" in line and "MB/s here" in line for line in plain)
    # Last, what it is judged against: a program keeps its bytes, so the lower of both.
    assert re.match(r"compare:  your loader [\d,]+ MB/s is \d+% of the bound of a load", bound)
    assert "the lower of storage and memory_fill: " in bound


def test_ctrl_c_on_an_attached_watch_says_the_process_still_runs(modelmon_argv) -> None:
    """Attached, modelmon only looks: Ctrl+C ends the watch, not the process, and says so."""
    target = subprocess.Popen(["sleep", "60"])
    watch = subprocess.Popen(
        [*modelmon_argv, "watch", "--pid", str(target.pid)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _watching(watch.pid, target.pid):
            time.sleep(0.05)
        os.kill(watch.pid, signal.SIGINT)
        _, err = watch.communicate(timeout=30)
        assert watch.returncode == 130, err
        assert "it still runs" in err and "was stopped" not in err, err
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()
        if watch.poll() is None:
            watch.kill()
            watch.communicate()


def _watching(watcher: int, target: int) -> bool:
    """Whether the watcher holds the target's /proc files open (its tree reads them each
    look: the watch has begun, its Ctrl+C handler in place)."""
    try:
        fds = os.listdir(f"/proc/{watcher}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{watcher}/fd/{fd}").startswith(f"/proc/{target}/"):
                return True
    return False


def test_the_command_ends_when_modelmon_is_killed(modelmon_argv, tmp_path: Path) -> None:
    """SIGKILL leaves modelmon no way to stop what it started: the command gets SIGTERM from
    the kernel when modelmon dies (its parent-death signal), instead of running on."""
    marker = tmp_path / "started"
    script = f"import pathlib, time; pathlib.Path({str(marker)!r}).touch(); time.sleep(60)"
    watch = subprocess.Popen(
        [*modelmon_argv, "watch", "--", sys.executable, "-c", script],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    command: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        command = _descendants(watch.pid)
        assert command, "the command did not start"
        watch.kill()
        watch.wait(30)
        _, alive = psutil.wait_procs(command, timeout=10)
        assert not alive, f"left running after modelmon was killed: {alive}"
    finally:
        for process in command:
            with contextlib.suppress(psutil.Error):
                process.kill()


def test_no_model_seen_is_said_in_the_terms_of_what_was_given():
    """A named model never seen is named, not met with advice to name it; another user's
    process, whose descriptors modelmon cannot read, is said to be that."""
    from types import SimpleNamespace

    from modelmon.cli.watch import _no_model_seen

    named = SimpleNamespace(path="/m/model.safetensors", named=True)
    seen = SimpleNamespace(files=(named,), notes=())
    assert _no_model_seen(seen, "pid 7") == (  # type: ignore[arg-type]
        "pid 7 never opened or mapped model.safetensors, and none of it arrived"
    )
    other = SimpleNamespace(
        files=(named,), notes=("descriptors (/proc/PID/fd) of a process of another user",)
    )
    assert "belongs to another user" in _no_model_seen(other, "pid 7")  # type: ignore[arg-type]
    unnamed = SimpleNamespace(files=(), notes=())
    assert "name it with --model PATH" in _no_model_seen(unnamed, "pid 7")  # type: ignore[arg-type]


# Reads the files WATCHED lists: no model path among the command's words but those given.
READER = "import os\nfor p in os.environ['WATCHED'].split(os.pathsep): open(p, 'rb').read()\n"


@pytest.mark.parametrize("how", ["--model index", "index in argv", "--model folder"])
def test_watch_takes_an_index_or_a_folder_as_every_verb_does(
    modelmon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The index's shards are the model, made cold first: never the index's JSON (which
    read at 0.2 MB/s and made the program's memory 128,210× "the model"), nor, in a folder,
    a consolidated copy beside the shards that the program does not read."""
    index = write_safetensors_model(
        tmp_path / "m", layers=2, hidden=128, vocab=512, shards=2, seed=4
    )
    shards = sorted(str(p.resolve()) for p in index.parent.glob("model-*.safetensors"))
    shutil.copy(shards[0], index.parent / "consolidated.safetensors")
    monkeypatch.setenv("WATCHED", os.pathsep.join(shards))
    named = {
        "--model index": ["--model", str(index)],
        "--model folder": ["--model", str(index.parent)],
        "index in argv": [],
    }[how]
    words = [str(index)] if how == "index in argv" else []
    done = modelmon(
        "watch", "--json", "--interval-ms", "10", *named, "--",
        sys.executable, "-c", READER, *words,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert sorted(f["path"] for f in data["files"]) == shards
    assert all(f["named"] for f in data["files"])
    size = sum(os.path.getsize(p) for p in shards)
    assert data["model_bytes"] == data["bytes_read"] == size
    assert data["cache"]["cold"] is True
    assert not any("no model was named" in note for note in data["notes"])


@pytest.mark.parametrize("how", ["--model", "argv"])
def test_watch_takes_hub_and_ollama_references(
    modelmon, model_home, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    snapshot = model_home.snapshots["acme/tiny-llama"]
    shards = sorted(str(p) for p in snapshot.glob("*.safetensors"))
    (blob,) = (model_home.ollama / "blobs").glob("sha256-*")  # tinyllama's GGUF
    expected = sorted(os.path.realpath(p) for p in [*shards, blob])
    monkeypatch.setenv("WATCHED", os.pathsep.join(expected))
    references = ["hf:acme/tiny-llama", "ollama:tinyllama"]
    if how == "--model":
        given = [word for reference in references for word in ("--model", reference)]
        command = [sys.executable, "-c", READER]
    else:
        given, command = [], [sys.executable, "-c", READER, *references]
    done = modelmon("watch", "--json", "--interval-ms", "10", *given, "--", *command)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert sorted(f["path"] for f in data["files"]) == expected
    assert data["cache"]["cold"] is True
    assert data["bytes_read"] == sum(os.path.getsize(p) for p in expected)


@pytest.mark.parametrize(
    "given", ["hf:foo", "hf:nobody/nothing", "ollama:nothing", "/nonexistent/model"]
)
def test_a_bad_model_is_the_one_line_and_code_inspect_gives(
    modelmon, model_home, given: str
) -> None:
    watched = modelmon("watch", "--model", given, "--", "true")
    inspected = modelmon("inspect", given)
    assert watched.returncode == inspected.returncode != 0
    assert watched.stderr == inspected.stderr and len(watched.stderr.splitlines()) == 1


HOLDER = (
    "import sys, time\n"
    "f = open(sys.argv[1], 'rb')\n"
    "sys.stdout.write('holding\\n'); sys.stdout.flush()\n"
    "time.sleep(60)\n"
)


def test_another_process_with_the_model_open_is_named_in_one_line(modelmon, model: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(model)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        name = Path(f"/proc/{holder.pid}/comm").read_text().strip()
        # It runs past a sample: a cat of a cached file can end within the first one.
        done = modelmon(
            "watch", "--interval-ms", "10", "--", "sh", "-c",
            'cat "$0" > /dev/null; sleep 0.05', str(model),
        )  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert done.returncode == 0, done.stderr
    others = [line for line in done.stdout.splitlines() if line.startswith("others:")]
    assert others == [f"others:   pid {holder.pid} ({name}) had {model.name} open"]
    assert "[other-reader] Another process was reading the model's files" in done.stdout


def test_a_command_reading_two_thousand_files_is_watched_under_a_1024_limit(
    modelmon_argv: list[str], tmp_path: Path
) -> None:
    """2,000 model files named only as the command's arguments, watched by a modelmon whose
    soft open-files limit is 1024 (a common default): the watch keeps a descriptor for each,
    every byte arrives, the watch ends, and the command keeps the limit it was started with."""
    import resource

    folder = tmp_path / "parts"
    folder.mkdir()
    files = []
    for index in range(2000):
        part = folder / f"part-{index:04d}.bin"
        part.write_bytes(b"\x80\x02" + index.to_bytes(2, "little") * 8191)  # a pickle's start
        files.append(str(part))
    seen = tmp_path / "limit-seen"
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard > 2100, "the test needs a hard limit above the files it opens"
    done = subprocess.run(
        [*modelmon_argv, "watch", "--json", "--", "sh", "-c",
         'ulimit -Sn > "$0"; cat "$@" > /dev/null', str(seen), *files],
        capture_output=True, text=True, timeout=300, check=False,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["files"]) == 2000 and data["bytes_read"] == 2000 * 16384
    assert seen.read_text().strip() == "1024"


def test_a_quiet_of_zero_is_refused_in_one_line(modelmon, model: Path) -> None:
    """0 stopped a loader 0.2 s in, with 16 % of its model arrived, and called that its speed."""
    done = modelmon("watch", "--quiet", "0", "--", "cat", str(model))
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("modelmon: argument --quiet: must be a number from 1 to")


def test_a_program_that_writes_into_its_model_failed(modelmon, model: Path, tmp_path) -> None:
    """Exit 5 as a failed command: what arrived is no load of the model, never a speed."""
    copy = tmp_path / model.name
    shutil.copy(model, copy)
    writer = "import sys; open(sys.argv[1], 'rb').read(); open(sys.argv[1], 'ab').write(b' ')"
    done = modelmon("watch", "--json", "--", sys.executable, "-c", writer, str(copy))
    assert done.returncode == 5
    assert done.stderr.strip().endswith(
        "wrote into its model while it ran: what arrived is not a load of it"
    )
    data = json.loads(done.stdout)
    assert "model-written" in {finding["code"] for finding in data["findings"]}


def test_leading_name_value_words_are_the_commands_environment(
    modelmon, model: Path, tmp_path: Path
) -> None:
    """As in a shell and in cmd:, not a program named 'GREETING=hi' that cannot be run."""
    said = tmp_path / "said"
    done = modelmon(
        "watch", "--", "GREETING=hi there", "sh", "-c",
        f'printf %s "$GREETING" > {said}; sleep 0.2; cat {model} > /dev/null',
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert said.read_text() == "hi there"
