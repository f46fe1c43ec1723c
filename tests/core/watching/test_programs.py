"""Real programs watched from outside: the findings, the bytes and the descriptor groups
against what each program did (its own report)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from modelmon.core.output import dumps, render_watch
from modelmon.core.system import cache
from modelmon.core.watching import assemble
from modelmon.core.watching.watch import Watch

from ...memory_cgroup import memory_cgroup
from .running import program, wait_until, watching


def codes(result) -> set[str]:
    return {finding.code for finding in result.findings}


def test_forked_readers_sharing_one_descriptor_are_named_with_their_pids(
    tmp_path: Path, small_model: Path
) -> None:
    readers = 4

    def make(folder: Path, out: int) -> Watch:
        command = program("forked-mapping", small_model, readers=readers, hold=folder / "hold")
        return Watch(command, stdout=out, interval_s=0.05)

    with watching(tmp_path, make) as running:
        wait_until(lambda: running.loaded() == readers, "every reader to map its share")
        # One look with every reader holding the description, then let them go.
        running.look_again("a look at the readers")
        running.release()
        result = running.result()
    report = running.program_report()
    assert result.exit_code == 0 and result.status == "exited"
    parent, children = report["pids"][0], report["pids"][1:]
    assert len(children) == readers
    shared = [d for d in result.descriptions if d.shared]
    assert len(shared) == 1
    assert set(shared[0].pids) == {parent, *children}
    finding = next(f for f in result.findings if f.code == "shared-descriptor")
    assert set(finding.evidence["pids"]) == {parent, *children}
    assert str(children[0]) in finding.text
    # Every page was touched through the mappings, from a verified cold cache.
    assert result.cache is not None and result.cache.cold
    assert result.arrived_bytes >= small_model.stat().st_size * 0.99
    assert result.files[0].mapped and "partial-read" not in codes(result)
    assert "not-cold" not in codes(result)
    assert result.other_readers == ()  # the tree's own readers are no one else's
    # The children's counters are kept after they exited.
    assert {p.pid for p in result.processes} >= {parent, *children}
    assert all(p.exited_s is not None for p in result.processes)


def test_lazy_slices_are_reported_as_a_partial_read(tmp_path: Path, large_model: Path) -> None:
    def make(folder: Path, out: int) -> Watch:
        command = program("lazy-slices", large_model, hold=folder / "hold")
        return Watch(command, stdout=out, interval_s=0.05)

    with watching(tmp_path, make) as running:
        wait_until(lambda: running.loaded() == 1, "the slices")
        running.look_again("a look at the mapping")
        running.release()
        result = running.result()
    report = running.program_report()
    size = large_model.stat().st_size
    finding = next(f for f in result.findings if f.code == "partial-read")
    assert finding.evidence["mapped"] is True
    # The pages it touched (and the readahead around them) arrived; the rest did not.
    assert report["bytes"] <= result.bytes_read < size * 0.5
    assert finding.evidence["fraction"] == pytest.approx(result.bytes_read / size, abs=1e-6)
    assert result.files[0].mapped
    assert result.loader.key == "safetensors"
    assert not [d for d in result.descriptions if d.shared]


def test_load_file_reads_every_byte(tmp_path: Path, small_model: Path) -> None:
    def make(folder: Path, out: int) -> Watch:
        return Watch(program("load-file", small_model), stdout=out, interval_s=0.02)

    with watching(tmp_path, make) as running:
        result = running.result()
    report = running.program_report()
    size = small_model.stat().st_size
    assert report["bytes"] > 0.99 * size  # the tensors: all but the header
    assert result.arrived_bytes == result.bytes_read == size
    assert result.files[0].unique_arrived_bytes == size
    assert not codes(result) & {"partial-read", "shared-descriptor", "not-cold"}
    assert result.seconds is not None and 0 < result.seconds <= result.wall_seconds
    assert result.mbps is not None and result.mbps > 0


def test_cat_arrives_whole_and_is_named(tmp_path: Path, small_model: Path) -> None:
    with open(os.devnull, "wb") as sink:
        watch = Watch(["cat", str(small_model)], stdout=sink.fileno(), interval_s=0.01)
        result = watch.run()
    size = small_model.stat().st_size
    assert result.exit_code == 0 and result.loader.label == "cat"
    assert result.arrived_bytes == result.bytes_read == size
    assert result.files[0].named and result.cache is not None and result.cache.cold
    assert result.cache.resident_after > 0.99
    # The arrivals are in the read log, as a load's reads are: together, the whole file once.
    arrivals = result.samples.arrivals
    assert int(arrivals["length"].sum()) == size and set(arrivals["file"].tolist()) == {0}
    # The residency grid the app draws for it: every bin full, as the last look saw it (a host
    # that pages out idle cache, as DAMON does here, may take a few pages before that look, as
    # resident_after allows above).
    grid = watch.observer.residency_maps(8)
    assert list(grid) == [str(small_model.resolve())]
    assert grid[str(small_model.resolve())].min() > 0.98


def test_attach_to_a_running_program(tmp_path: Path, small_model: Path) -> None:
    go = tmp_path / "go"
    started: list[subprocess.Popen[bytes]] = []

    def make(folder: Path, out: int) -> Watch:
        command = program("read-whole", small_model, go=go, hold=folder / "hold")
        started.append(subprocess.Popen(command, stdout=out))
        cache.evict([small_model])  # attached, the watch keeps the cache as it is
        return Watch(pid=started[0].pid, model=[str(small_model)], interval_s=0.02)

    try:
        with watching(tmp_path, make) as running:
            wait_until(lambda: running.watch.progress().looks >= 1, "the watch to attach")
            go.touch()
            wait_until(lambda: running.loaded() == 1, "the program's read")
            running.look_again("a look at its fd")
            running.release()
            result = running.result()
    finally:
        for target in started:
            target.wait(30)
    target = started[0]
    size = small_model.stat().st_size
    assert result.attached and result.status == "gone" and result.exit_code is None
    assert result.pid == target.pid and result.command is None
    assert result.arrived_bytes == size
    assert result.files[0].opened and result.files[0].read_position_peak == size
    assert [d.pids for d in result.descriptions] == [(target.pid,)]
    assert result.other_readers == ()


def test_attached_to_a_program_whose_model_s_cache_is_hidden_says_one_thing_of_it(
    tmp_path: Path, small_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's model (the kernel shows its page cache only to its owner, a user who
    could write it, or root): the cache is not known, said once, never "warm (verified,
    100.0% resident before)" beside "cannot verify"; no fraction of it is given."""
    hidden = f"cannot see the page cache of {small_model}: not yours"
    monkeypatch.setattr(cache, "hidden_reason", lambda path: hidden)
    monkeypatch.setattr(assemble, "hidden_reason", lambda path: hidden)
    go, started = tmp_path / "go", []
    cache.warm([small_model])  # all of it resident, as a loader that ran leaves it

    def make(folder: Path, out: int) -> Watch:
        command = program("read-whole", small_model, go=go, hold=folder / "hold")
        started.append(subprocess.Popen(command, stdout=out))
        return Watch(pid=started[0].pid, model=[str(small_model)], interval_s=0.02)

    try:
        with watching(tmp_path, make) as running:
            go.touch()
            wait_until(lambda: running.loaded() == 1, "the program's read")
            running.look_again("a look at its fd")
            running.release()
            result = running.result()
    finally:
        for target in started:
            target.wait(30)
    (line,) = [line for line in render_watch(result).splitlines() if line.startswith("cache:")]
    assert line.startswith("cache:    not known: cannot verify the page cache of"), line
    assert "verified," not in line and "%" not in line and "warm" not in line, line
    cache_json = json.loads(dumps(result.to_dict()))["cache"]  # as --json prints it
    assert cache_json["resident_before"] is None and cache_json["resident_after"] is None
    assert not cache_json["cold"] and not cache_json["warm"]
    assert all(math.isnan(f.resident_before) for f in result.files)
    assert not [f for f in result.findings if "of the model was in the page cache" in f.text]


# Starts a child that ignores SIGTERM (in the command's process group) and, once it does,
# writes both pids; then waits. The parent itself dies of SIGTERM at once.
STUBBORN_CHILD = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "sys.stdout.write('ignoring'); sys.stdout.flush(); time.sleep(60)"],
    stdout=subprocess.PIPE)
child.stdout.read(8)
with open(sys.argv[1], "w") as out:
    out.write(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""


def test_cancel_leaves_no_process_of_the_tree_running(tmp_path: Path, small_model: Path) -> None:
    """The root goes with SIGTERM; a child that ignores it is SIGKILLed once the grace is
    over, not left running after the watch."""
    pids_file = tmp_path / "pids"

    def make(folder: Path, out: int) -> Watch:
        command = [sys.executable, "-c", STUBBORN_CHILD, str(pids_file)]
        return Watch(command, model=[str(small_model)], stdout=out, interval_s=0.05)

    with watching(tmp_path, make) as running:
        wait_until(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 2, "pids")
        pids = [int(pid) for pid in pids_file.read_text().split()]
        running.watch.cancel()
        result = running.result()
    assert result.status == "cancelled"
    assert any("SIGKILL" in note for note in result.notes), result.notes
    for pid in pids:
        try:
            state = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            continue
        assert state == psutil.STATUS_ZOMBIE, (pid, state)  # ended; its new parent reaps it


def test_pages_reclaimed_before_the_next_look_still_count_as_arrived(
    tmp_path: Path, large_model: Path
) -> None:
    """cat in a memory cgroup far smaller than the file: its page cache is reclaimed as it
    reads, so most pages come and go between two looks. The shadow entries reclaim leaves
    count them as arrivals the page bitmaps never saw (a lower bound: a page read ahead,
    reclaimed and read again consumes its shadow)."""
    size = large_model.stat().st_size
    with memory_cgroup(32 << 20) as cgroup, open(os.devnull, "wb") as sink:
        watch = Watch(
            cgroup.command(["cat", str(large_model)]),
            model=[str(large_model)],
            cache="cold",
            stdout=sink.fileno(),
            interval_s=0.5,
        )
        result = watch.run()
    assert result.exit_code == 0 and result.cache is not None and result.cache.cold
    (file,) = result.files
    assert file.resident_after < 0.5  # most of it went before the end: reclaimed, not seen
    seen = file.unique_arrived_bytes  # pages a look found resident
    assert seen < file.arrived_bytes <= size, (seen, file.arrived_bytes, size)
    assert any("reclaimed before the next look" in note for note in result.notes)


def test_a_warm_file_reclaimed_while_nobody_reads_it_has_no_arrivals(
    tmp_path: Path, large_model: Path
) -> None:
    """The other side of counting shadow entries: pages that were there before the watch and
    are reclaimed under it (their cgroup's limit lowered) leave shadows too, and are seen
    leaving: nothing arrived."""
    with memory_cgroup(1 << 30) as cgroup:
        subprocess.run(cgroup.command(["cat", str(large_model)]), stdout=subprocess.DEVNULL)
        assert cache.residency_of([large_model]) > 0.9  # cached, charged to the cgroup

        def make(folder: Path, out: int) -> Watch:
            waiting = f'while [ ! -e "{folder / "hold" / "release"}" ]; do sleep 0.02; done'
            return Watch(
                cgroup.command(["sh", "-c", waiting]),
                model=[str(large_model)],
                cache="keep",
                stdout=out,
                interval_s=0.05,
            )

        with watching(tmp_path, make) as running:
            wait_until(lambda: running.watch.progress().looks >= 2, "the watch's first looks")
            (cgroup.path / "memory.limit_in_bytes").write_text(str(16 << 20))  # reclaims
            looks = running.watch.progress().looks
            wait_until(lambda: running.watch.progress().looks > looks + 2, "looks after it")
            running.release()
            result = running.result()
    (file,) = result.files
    assert file.resident_before > 0.9 and file.resident_after < 0.2
    assert file.arrived_bytes == 0


# Forks, the child calls setsid and forks again, and the grandchild (a daemon, no longer in
# the command's tree by parentage) reads the model whole, writes its pid and waits; the
# command and the middle process exit at once.
# The daemon says its pid before it reads: the watch may end it as soon as the model has
# arrived, which can be before a line after its reads would run.
DAEMONIZING = """
import os, sys, time
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
with open(sys.argv[2], "w") as out:
    out.write(str(os.getpid()))
if sys.argv[3] == "reads":
    with open(sys.argv[1], "rb") as model:
        while model.read(1 << 20):
            pass
time.sleep(60)
"""


@pytest.mark.parametrize(
    ("daemon_reads", "memory_limit"), [("reads", None), ("idles", None), ("reads", 1 << 30)]
)
def test_a_daemon_the_command_leaves_is_watched_and_ended(
    tmp_path: Path, small_model: Path, daemon_reads: str, memory_limit: int | None
):
    """A double fork + setsid leaves the command's tree by parentage: the watch still
    counts what the daemon read (the model arrived) and ends it with the watch; one that
    never reads ends too (the watch does not wait on it forever). What the result says of
    the tree is its state once the stop is done: the daemon stopped, named by its command,
    no process said to run still, every one exited."""
    pid_file = tmp_path / "daemon.pid"
    command = [sys.executable, "-c", DAEMONIZING, str(small_model), str(pid_file), daemon_reads]
    watch = Watch(command, model=[str(small_model)], interval_s=0.02, memory_limit=memory_limit)
    result = watch.run()
    assert pid_file.exists(), "the daemon did not run"
    daemon = int(pid_file.read_text())
    seen = (result.ended_by, result.exit_code, result.arrived_bytes, result.notes)
    assert not psutil.pid_exists(daemon), f"the daemon outlived the watch: {seen}"
    assert result.exit_code == 0, seen
    expected = small_model.stat().st_size if daemon_reads == "reads" else 0
    assert result.arrived_bytes == expected, seen
    (left,) = [note for note in result.notes if "left 1 process(es) running" in note]
    assert left.endswith("modelmon stopped them (SIGTERM)"), left
    assert not [note for note in result.notes if "still run" in note], seen
    assert all(p.exited_s is not None for p in result.processes), result.processes
    assert f"pids {daemon} ({sys.executable} -c import os, sys" in left, left
    assert "\n" not in left, left


def test_the_command_reads_nothing_from_modelmons_standard_input(tmp_path: Path):
    """Its stdin is /dev/null: a command that reads it ends at once, never waiting on
    whatever modelmon's own stdin is (a pipe left open, the user's terminal)."""
    reader, writer = os.pipe()  # modelmon's stdin: a pipe nobody closes
    saved = os.dup(0)
    os.dup2(reader, 0)
    try:
        out = tmp_path / "out"
        with open(out, "wb") as sink:
            result = Watch(["cat"], stdout=sink.fileno(), interval_s=0.02).run()
    finally:
        os.dup2(saved, 0)
        for fd in (saved, reader, writer):
            os.close(fd)
    assert result.exit_code == 0 and out.read_bytes() == b""


def test_a_watch_with_descriptors_past_1024_open_ends(tmp_path: Path, small_model: Path):
    """With the watching process holding more than FD_SETSIZE (1024) descriptors, as one
    with a thousand shards open does, the command's pidfd is numbered past it: waiting on it
    must not use select(), which raises there, and leave the watch and its sampler behind."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), max(hard, 2048)))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with open(os.devnull, "wb") as sink:
            result = Watch(["cat", str(small_model)], stdout=sink.fileno(), interval_s=0.02).run()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert result.exit_code == 0 and result.arrived_bytes == small_model.stat().st_size


def test_a_program_that_writes_into_its_model_is_never_a_load(tmp_path: Path, small_model):
    """It reads the model and appends to it: the watch says the model changed, and a run of
    it as a configuration fails instead of giving a MB/s."""
    import shutil

    from modelmon.core import open_model, run_program
    from modelmon.core.configuration import parse_program

    model = tmp_path / "model.safetensors"
    shutil.copy(small_model, model)
    writer = "import sys; open(sys.argv[1], 'rb').read(); open(sys.argv[1], 'ab').write(b' ')"
    result = Watch([sys.executable, "-c", writer, str(model)], interval_s=0.02).run()
    assert result.changed_files == (str(model),)
    assert "model-written" in codes(result)
    shutil.copy(small_model, model)
    program = parse_program(f'cmd: {sys.executable} -c "{writer}" {{path}}')
    load = run_program(open_model(model), program).result
    assert load.status == "failed" and "wrote into its model" in (load.error or "")


def test_a_file_of_the_model_found_while_the_program_ran_is_checked_for_writes_too(
    tmp_path: Path, small_model
):
    """The model's folder given: a file in it that no model lists (extra.bin) is found when
    the program has it open, and what the program writes into it after that is seen."""
    import shutil

    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(small_model, folder / "model.safetensors")
    extra = folder / "extra.bin"
    extra.write_bytes(b"\x80\x02" + b"\1" * ((1 << 20) - 2))  # starts as torch's pickle does
    # Holds the file open long enough to be found by a look on a busy machine, then writes.
    writer = (
        "import sys, time; f = open(sys.argv[1], 'rb'); f.read(); time.sleep(2); "
        "open(sys.argv[1], 'ab').write(b' ')"
    )
    watch = Watch([sys.executable, "-c", writer, str(extra)], model=[str(folder)], interval_s=0.02)
    result = watch.run()
    found = [f for f in result.files if f.path == str(extra)]
    assert found and not found[0].named, [f.path for f in result.files]
    assert result.changed_files == (str(extra),)
    assert "model-written" in codes(result)


# Copies SOURCE to DEST slowly (the watch finds DEST while it is being written), then loads it.
COPIER = """
import os, time
with open(os.environ["SOURCE"], "rb") as source, open(os.environ["DEST"], "wb") as dest:
    while chunk := source.read(1 << 18):
        dest.write(chunk)
        dest.flush()
        time.sleep(0.1)
open(os.environ["DEST"], "rb").read()
time.sleep(0.2)
"""


def test_a_copy_the_program_makes_and_loads_is_not_a_write_into_the_model(tmp_path: Path):
    """No model given (the paths are in the environment): the program copies a model file
    and loads the copy, which the watch finds while it is being written. That is no write
    into a model it loads."""
    source = tmp_path / "source.safetensors"
    source.write_bytes(b"\2" * (4 << 20))
    copy = tmp_path / "local" / "copy.safetensors"
    copy.parent.mkdir()
    env = {**os.environ, "SOURCE": str(source), "DEST": str(copy)}
    result = Watch([sys.executable, "-c", COPIER], env=env, cache="keep", interval_s=0.02).run()
    assert str(copy) in [f.path for f in result.files], "the copy was never found"
    assert result.changed_files == ()
    assert "model-written" not in codes(result)


# Reads the whole file (it is then in the page cache), keeps it open or mapped, says so, waits.
HOLDER = """
import mmap, sys, time
f = open(sys.argv[1], "rb")
f.read()
if sys.argv[2] == "mapped":
    held = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    f.close()
sys.stdout.write("holding\\n")
sys.stdout.flush()
time.sleep(60)
"""


@pytest.mark.parametrize("how", ["open", "mapped"])
def test_another_process_with_the_model_is_named_not_blamed_on_the_program(
    tmp_path: Path, small_model: Path, how: str
) -> None:
    """A reader outside the watched tree keeps the model cached: the watch names it (pid
    and command name) and says the cache was its doing, not a warm start of the program's."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(small_model), how], stdout=subprocess.PIPE
    )

    def make(folder: Path, out: int) -> Watch:
        command = program("read-whole", small_model, hold=folder / "hold")
        return Watch(command, cache="keep", stdout=out, interval_s=0.02)

    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"holding\n"
        name = Path(f"/proc/{holder.pid}/comm").read_text().strip()
        with watching(tmp_path, make) as running:
            wait_until(lambda: running.loaded() == 1, "the program's read")
            running.look_again("a look at its fd")
            running.release()
            result = running.result()
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert result.exit_code == 0 and result.files[0].opened
    assert [(r.pid, r.name, r.mapped) for r in result.other_readers] == [
        (holder.pid, name, how == "mapped")
    ]
    assert result.other_readers[0].files == (str(small_model.resolve()),)
    assert result.files[0].resident_before > 0.5  # the holder read it all: warm, not ours
    finding = next(f for f in result.findings if f.code == "other-reader")
    verb = "mapped" if how == "mapped" else "had"
    assert f"pid {holder.pid} ({name}) {verb} {small_model.name}" in finding.text
    assert "in the page cache when the program first read them" in finding.text
    assert "not-cold" not in codes(result)
    assert f"others:   pid {holder.pid} ({name})" in render_watch(result)
