"""Where the CLI's results go, end to end (``python -m modelmon`` in a subprocess).

Never one of the inputs, never a special file; ``-`` and ``/dev/stdout`` are standard output.
A target that cannot take the save is refused in one line before any measuring (exit 2). A
save that fails after the measuring anyway keeps the results beside the target or in the
state folder, says where in one line, and exits 4 (NOT_SAVED). Nothing is left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import IO

import pytest

from modelmon.core import read_config, write_gguf_model, write_safetensors_model
from modelmon.core.errors import BUDGET_NOT_KEPT

from ...conftest import mounted_loop_disk
from ...object_store import BUCKET
from .conftest import WORKER_MARK

MODELMON = [sys.executable, "-m", "modelmon"]
# A refusal takes an interpreter's start (3-7 s with both cores busy elsewhere); a run that
# measured first spends its hour of budget (NEVER_SPENT) far past this, which fails it.
HANG_S = 120.0
NEVER_SPENT = ("--budget", "3600")
USAGE, NOT_SAVED = 2, 4


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's digest, else its kind."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            if path.is_symlink():
                seen[str(path)] = f"-> {os.readlink(path)}"
            elif path.is_file():
                seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen[str(path)] = "dir" if path.is_dir() else "special"
    return seen


def without_ray(folder: Path) -> dict[str, str]:
    """The environment of a run that must refuse before it asks for a cluster: a ``ray``
    (in ``folder``) that fails the run with a traceback where it is imported."""
    package = folder / "no-cluster" / "ray"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('raise RuntimeError("asked for the cluster")\n')
    return {**os.environ, "PYTHONPATH": str(package.parent)}


def refused(
    root: Path, *args: str, says: str, measuring_reads: Callable[[], int] | None = None
) -> None:
    """modelmon, run beside ``root``, exits 2 with one line holding ``says`` before it
    measures; nothing under ``root`` changes. Before, by what measuring would leave: a
    recommend of a file is given a budget it would spend past ``HANG_S`` (``NEVER_SPENT``),
    a fleet finds a ``ray`` that fails it (``without_ray``), and ``measuring_reads``
    counts the reads of a bucket's model beyond opening it (its proxy sees them): none."""
    before = tree(root)
    done = subprocess.run(  # a hang, or a run that measured first, fails here
        [*MODELMON, *args],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
        cwd=root.parent,
        env=without_ray(root.parent),
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == USAGE, (args, done.returncode, done.stderr)
    assert len(lines) == 1 and says in lines[0], (args, done.stderr)
    assert tree(root) == before, args
    if measuring_reads is not None:
        assert measuring_reads() == 0, (args, "refused only after measuring")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_safetensors_model(tmp_path / "model", layers=1, hidden=64, vocab=128)


def recommend(
    model: Path, *args: str, cwd: Path, stdout: int | IO[str] = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MODELMON, "recommend", str(model), "--budget", "5", "--workers", "2", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )


# --- never an input, never a special file ------------------------------------------------------


def test_fleet_csv_refuses_the_model_under_any_name_before_anything_else(
    model: Path, tmp_path: Path
) -> None:
    """Refused before the cluster (and whether or not Ray is installed)."""
    (tmp_path / "link.csv").symlink_to(model)
    os.link(model, tmp_path / "hard.csv")
    os.mkfifo(tmp_path / "fifo.csv")
    for output, says in (
        (model, "is the input"),
        (tmp_path / "link.csv", "is the input"),
        (tmp_path / "hard.csv", "is the input"),
        (tmp_path / "fifo.csv", "not a regular file"),
    ):
        refused(tmp_path, "fleet", "load", str(model), "--csv", str(output), says=says)


def test_recommend_refuses_special_files(model: Path, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.toml")
    for output in (tmp_path / "fifo.toml", "/dev/null", "/dev/stderr"):
        args = ("recommend", str(model), *NEVER_SPENT, "-o", str(output))
        refused(tmp_path, *args, says="name a file, or - for standard output")


def test_recommend_writes_standard_output_by_name_to_standard_output(
    model: Path, tmp_path: Path
) -> None:
    """stdout redirected to a file, as ``-o /dev/stdout > f`` does: the config arrives there
    through the descriptor (the explanation goes to stderr), /dev/stdout stays a symlink.
    (Every other name of standard output goes through the same guard: test_outputs.py.)"""
    redirected = tmp_path / "redirected.toml"
    with open(redirected, "w") as stdout:
        done = recommend(model, "-o", "/dev/stdout", cwd=tmp_path, stdout=stdout)
    assert done.returncode == 0, done.stderr
    config = read_config(redirected)  # the whole config, nothing else
    assert f"config='{redirected}'" in config.document["apply"]["modelmon"]  # names itself
    assert "\nWhy:\n" in done.stderr
    assert os.path.islink("/dev/stdout")
    assert sorted(os.listdir(tmp_path)) == ["model", "redirected.toml"]


def test_recommend_into_a_pipe_names_a_copy_it_keeps(model: Path, tmp_path: Path) -> None:
    """``-o - | cat``: standard output is a pipe, no file. Walk 20's paste line then named
    ``config='modelmon.toml'``, a file that did not exist. The config now names a copy kept
    in the state folder, whose bytes are the ones the pipe carried, and stderr says where."""
    state = tmp_path / "state"
    done = subprocess.run(
        [*MODELMON, "recommend", str(model), "--budget", "5", "--workers", "2", "-o", "-"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "XDG_STATE_HOME": str(state)},
    )
    assert done.returncode == 0, done.stderr
    kept = list((state / "modelmon" / "recommendations").glob("*.toml"))
    assert len(kept) == 1, kept
    assert kept[0].read_text() == done.stdout  # the copy is what the pipe carried
    line = tomllib.loads(done.stdout)["apply"]["modelmon"]
    assert f"config='{kept[0]}'" in line, line
    assert f"a copy, the file the lines to paste name, is kept in {kept[0]}" in done.stderr
    assert f"config='{kept[0]}'" in done.stderr  # the answer's paste line, on stderr
    assert sorted(os.listdir(tmp_path)) == ["model", "state"]  # nothing written here


# --- never a model, judged by its bytes, unless --overwrite-model ---------------------------------


def test_recommend_and_fleet_refuse_a_model_that_is_not_theirs_unless_told(
    model: Path, tmp_path: Path
) -> None:
    """A copy of a model (or another model) is not an input of the run, and no report may
    replace it: refused at once, whatever its name; --overwrite-model says it may."""
    gguf = write_gguf_model(tmp_path / "other.gguf", layers=1, hidden=32, vocab=64)
    copies = {
        "copy.safetensors": model,
        "other-model.toml": model,
        "weights.csv": gguf,
    }
    for name, source in copies.items():
        shutil.copyfile(source, tmp_path / name)
    for name in copies:
        for args in (
            ("recommend", str(model), *NEVER_SPENT, "-o"),
            ("fleet", "load", str(model), "--csv"),
        ):
            refused(tmp_path, *args, str(tmp_path / name), says="which a report never replaces")
    done = recommend(model, "-o", "copy.safetensors", "--overwrite-model", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert read_config(tmp_path / "copy.safetensors").strategy
    # Never the run's own files, told or not.
    own = str(model)
    for args in (
        ("recommend", str(model), *NEVER_SPENT, "-o"),
        ("fleet", "load", str(model), "--csv"),
    ):
        refused(tmp_path, *args, own, "--overwrite-model", says="is the input")


def test_recommend_of_a_bucket_refuses_the_files_behind_it_and_its_credentials(
    faulty_s3: SimpleNamespace, tmp_path: Path
) -> None:
    """The bucket is a local folder served: the files behind its models are models by their
    bytes (the shard index too); the AWS credentials and config files are files the run
    reads, told --overwrite-model or not. The proxy in front of the bucket sees that no byte
    of a tensor was read: refused before measuring. Each refusal is an interpreter's start
    and the bucket's opening (3-6 s each with both cores busy elsewhere), so each case is
    run once: which model's bytes a file holds, or which of the bucket's models the run
    opens, does not change what is refused."""
    bucket = faulty_s3.root / BUCKET
    credentials = Path(faulty_s3.env["AWS_SHARED_CREDENTIALS_FILE"])
    config = Path(faulty_s3.env["AWS_CONFIG_FILE"])
    credentials.write_text("[default]\n")
    config.write_text("[default]\n")
    single, sharded = f"s3://{BUCKET}/single/", f"s3://{BUCKET}/sharded/"
    refusals = [  # (the run's model, -o, what it says, told)
        (single, bucket / "single" / "model.safetensors", "is a safetensors model", ()),
        (
            sharded,
            bucket / "sharded" / "model.safetensors.index.json",
            "is a safetensors shard index",
            (),
        ),
        (single, bucket / "gguf" / "tiny-Q8_0.gguf", "is a GGUF model", ()),
        (sharded, credentials, "is the input", ()),
        (single, config, "is the input", ()),
        (single, credentials, "is the input", ("--overwrite-model",)),
        (sharded, config, "is the input", ("--overwrite-model",)),
    ]
    targets = {target for _, target, _, _ in refusals}
    before = {target: target.read_bytes() for target in targets}
    proxy = faulty_s3.proxy

    def measuring_reads() -> int:
        """The GETs since the last call beyond opening the model: its opening reads each
        object once (a header, an index); measuring reads each again, loads with If-Match."""
        with proxy._lock:
            seen, proxy.seen[:] = list(proxy.seen), []
        gets = [r for r in seen if r.method == "GET" and "list-type=" not in r.path]
        per_object = Counter(r.path for r in gets)
        return sum(n - 1 for n in per_object.values()) + sum(r.if_match is not None for r in gets)

    try:
        for model, target, says, told in refusals:
            args = ("recommend", model, "--json", "-o", str(target), *told)
            refused(tmp_path, *args, says=says, measuring_reads=measuring_reads)
    finally:  # the bucket is the session's: a test that failed leaves it as it found it
        changed = {t: t.read_bytes() for t in targets if t.read_bytes() != before[t]}
        for target in changed:
            target.write_bytes(before[target])
    assert not changed, list(changed)


# --- without -o: a config file that exists, named in one line -----------------------------------


def test_recommend_without_output_writes_a_new_file_here_and_names_it(
    model: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "modelmon.toml").write_text("the user's own file\n")
    (work / "modelmon-2.toml").write_text("an earlier recommendation\n")
    done = recommend(model, cwd=work)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("written to modelmon-3.toml")  # the next free name
    # The snippet loads the file written, by its whole path: pasted anywhere, it finds it.
    assert f"config='{work / 'modelmon-3.toml'}'" in done.stdout
    assert read_config(work / "modelmon-3.toml").strategy
    assert (work / "modelmon.toml").read_text() == "the user's own file\n"
    assert (work / "modelmon-2.toml").read_text() == "an earlier recommendation\n"
    assert sorted(os.listdir(work)) == ["modelmon-2.toml", "modelmon-3.toml", "modelmon.toml"]


def test_recommend_without_output_in_a_folder_it_cannot_write_is_refused_at_once(
    model: Path, tmp_path: Path
) -> None:
    cwd = tmp_path / "gone"
    cwd.mkdir()
    done = subprocess.Popen(
        [*MODELMON, "recommend", str(model), *NEVER_SPENT],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    cwd.rmdir()  # a current folder that no longer exists can take no file
    try:
        _, err = done.communicate(timeout=HANG_S)
    finally:
        done.kill()
        done.wait()
    assert done.returncode == USAGE and "-o FILE" in err and err.count("\n") == 1, err


# --- what can be checked before measuring is, on a real ext4 ------------------------------------


def chattr(flags: str, path: Path) -> None:
    subprocess.run(["chattr", flags, str(path)], check=True)


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of ``folder`` but ``leave`` bytes: its free space allocated at
    once, then (``leave`` 0) the last blocks."""
    stats = os.statvfs(folder)
    # f_bfree: root writes into the blocks reserved for it too.
    size = stats.f_bfree * stats.f_frsize - leave - (1 << 20)  # the file's own metadata
    with open(folder / f"filler-{leave}", "wb") as filler:
        if size > 0:
            os.posix_fallocate(filler.fileno(), 0, size)
    if leave:
        return
    with contextlib.suppress(OSError), open(folder / "filler-tail", "wb") as tail:
        while True:
            tail.write(b"\0" * 4096)
            tail.flush()
            os.fsync(tail.fileno())


def test_recommend_refuses_before_measuring_what_cannot_take_the_save(
    model: Path, loop_disk: Path
) -> None:
    folder = loop_disk / "out"
    folder.mkdir()
    target = folder / "modelmon.toml"
    target.write_text("old\n")
    args = ("recommend", str(model), *NEVER_SPENT, "-o")
    chattr("+i", target)
    try:
        refused(loop_disk, *args, str(target), says="immutable (chattr +i)")
    finally:
        chattr("-i", target)
    chattr("+a", folder)
    try:  # an append-only folder: no traceback, no temp file it could never remove
        refused(loop_disk, *args, str(target), says="append-only (chattr +a)")
        refused(loop_disk, *args, str(folder / "new.toml"), says="append-only (chattr +a)")
    finally:
        chattr("-a", folder)
    fill(loop_disk)
    refused(loop_disk, *args, str(folder / "new.toml"), says="No space left")


# --- a save that fails after the measuring keeps the results ------------------------------------


def measuring(process: subprocess.Popen[str]) -> bool:
    """The guard is passed once a load's worker processes exist (a state, polled). Read from
    /proc/PID/task/*/children, which costs microseconds: a scan of every process would
    miss the short-lived workers of a small model's loads."""
    assert process.poll() is None, process.communicate()
    for children in Path(f"/proc/{process.pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            for child in children.read_text().split():
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
                if WORKER_MARK.encode() in cmdline:
                    return True
    return False


def sabotage_each_once_measuring(searches: list[Search]) -> None:
    """Every search polled in turn, each sabotaged in a thread of its own as soon as it
    measures: neither a search slow to its first load nor a sabotage that takes seconds (a
    disk filled) lets another search end unsabotaged."""
    waiting, sabotages = list(searches), []
    deadline = time.monotonic() + 60
    while waiting and time.monotonic() < deadline:
        for search in [s for s in waiting if measuring(s.process)]:
            act = SABOTAGE[search.case][0]
            sabotage = threading.Thread(target=act, args=(search.folder, search.target))
            sabotage.start()
            sabotages.append(sabotage)
            waiting.remove(search)
        time.sleep(0.002)
    for sabotage in sabotages:
        sabotage.join()
    assert not waiting, f"never started measuring: {[s.case for s in waiting]}"


def delete_folder(folder: Path, target: Path) -> None:
    shutil.rmtree(folder)


def make_immutable(folder: Path, target: Path) -> None:
    chattr("+i", target)


def fill_disk(folder: Path, target: Path) -> None:
    fill(folder.parent)


SABOTAGE: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "folder deleted": (delete_folder, "state"),
    "target made immutable": (make_immutable, "beside"),
    "disk filled": (fill_disk, "state"),
    "folder deleted, no state folder": (delete_folder, "nowhere"),
}


@dataclass
class Search:
    """One case of SABOTAGE: its target (in a folder of its own) and state folder, and the
    ``recommend -o target`` running on them."""

    case: str
    folder: Path
    state: Path
    process: subprocess.Popen[str]

    @property
    def target(self) -> Path:
        return self.folder / "modelmon.toml"


def start_search(case: str, folder: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> Search:
    # A model of its own beside the folder: no search evicts or reads another's.
    model = write_safetensors_model(folder.parent / "model", layers=1, hidden=64, vocab=128)
    folder.mkdir()
    target = folder / "modelmon.toml"
    target.write_text("old\n")
    state.mkdir()
    if SABOTAGE[case][1] == "nowhere":
        (state / "modelmon").write_text("a file where the state folder would be\n")
    if SABOTAGE[case][0] is fill_disk:  # most of it now: the sabotage fills the rest at once
        fill(folder.parent, leave=4 << 20)
    # The state folder is the search's own (the child takes the environment as it starts);
    # restore records and device locks stay the test's, shared by the searches as on one
    # machine.
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    process = subprocess.Popen(
        [*MODELMON, "recommend", str(model), "--budget", "5", "--workers", "2", "-o", str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return Search(case, folder, state, process)


def test_a_save_failing_after_the_measuring_keeps_the_config_and_says_where(
    loop_disk: Path,
    own_state: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each case of SABOTAGE in a search of its own. The searches run side by side: each
    spends its whole budget measuring, whatever the others do. The filled disk is a second
    loop device, so that the other saves fail only as their own case makes them."""
    with mounted_loop_disk(tmp_path / "to-fill") as disk_to_fill:
        searches = []
        try:
            for number, case in enumerate(SABOTAGE):
                disk = disk_to_fill if SABOTAGE[case][0] is fill_disk else loop_disk
                folder = disk / f"case-{number}" / "out"
                state = tmp_path / f"state-{number}"
                searches.append(start_search(case, folder, state, monkeypatch))
            sabotage_each_once_measuring(searches)
            outcomes = [search.process.communicate(timeout=120) for search in searches]
        finally:
            for search in searches:
                search.process.kill()
                search.process.wait()
                if search.case == "target made immutable":
                    chattr("-i", search.target)
        for search, (out, err) in zip(searches, outcomes, strict=True):
            kept_where_as_said(search, out, err)


def kept_where_as_said(search: Search, out: str, err: str) -> None:
    """The search exited NOT_SAVED, saying in one line where its config is kept. (Beside it,
    the budget's warning of a search whose ceilings took its 5 s, as they do on a machine
    whose cores are busy: that says nothing of the save.)"""
    case, folder, target = search.case, search.folder, search.target
    kept_where = SABOTAGE[case][1]
    budget = f"modelmon: warning: {BUDGET_NOT_KEPT}"
    lines = [line for line in err.strip().splitlines() if not line.startswith(budget)]
    assert search.process.returncode == NOT_SAVED, (case, err)
    assert len(lines) == 1 and "Traceback" not in err, (case, err)
    if kept_where == "nowhere":  # the config follows the explanation on stdout
        assert lines[0].endswith("it follows on standard output"), (case, lines[0])
        heading = "# modelmon.toml, as it would have been written:\n"
        assert "\nWhy:\n" in out and heading in out, case
        assert tomllib.loads(out.split(heading)[1])["recommended"]["strategy"], case
        return
    match = re.search(r"the config is kept in (\S+)$", lines[0])
    assert match, (case, lines[0])
    kept = Path(match[1])
    expected_folder = folder if kept_where == "beside" else search.state / "modelmon" / "unsaved"
    assert kept.parent == expected_folder, case
    assert read_config(kept).strategy, case  # the whole measured config
    assert "\nWhy:\n" in out and f"config='{kept}'" in out, case  # as without -o
    if folder.exists():  # no temp file left where the save failed
        assert not [name for name in os.listdir(folder) if name.endswith(".tmp")], case
        assert target.read_text() == "old\n", case
