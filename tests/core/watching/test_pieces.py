"""The pieces of a watch on their own: /proc parsers, descriptor groups by kcmp, page
arrivals, the tree's totals, model files from arguments, the loader, the arrival span."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from modelmon.core.errors import OptionsError, WatchError
from modelmon.core.loading.reads import now_ns
from modelmon.core.system import cache
from modelmon.core.system.residency import PAGE_SIZE
from modelmon.core.watching import tree as tree_module
from modelmon.core.watching.arrival import FOLIO_PAGES, FULL_BIN_TURNS, FileArrival, bin_edges
from modelmon.core.watching.assemble import arrival_span
from modelmon.core.watching.descriptors import DescriptorGroups, kcmp_same_file
from modelmon.core.watching.files import ModelFiles
from modelmon.core.watching.loaders import detect, fix
from modelmon.core.watching.naming import models_in_arguments, named_files
from modelmon.core.watching.openings import Descriptor, mapping_rss, parse_fdinfo, parse_maps
from modelmon.core.watching.orphans import hold_subreaper, own_children, release_subreaper
from modelmon.core.watching.page_runs import merge_runs, page_runs
from modelmon.core.watching.proc_counters import parse_stat
from modelmon.core.watching.tree import ProcessTree
from modelmon.core.watching.watch import Watch


def test_parsers_read_what_proc_prints() -> None:
    assert parse_fdinfo(b"pos:\t4096\nflags:\t02140000\nmnt_id:\t29\nino:\t12\n") == (
        4096,
        0o2140000,
    )
    maps = (
        b"00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/python3\n"
        b"7f0000000000-7f0040000000 r--s 00001000 00:2d 99 /mnt/m/model weights.safetensors\n"
        b"7f1000000000-7f1000001000 r-xp 00000000 08:02 77 /usr/lib/libtorch_cpu.so.2\n"
        b"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0   [stack]\n"
    )
    mappings, libraries = parse_maps(maps)
    assert [(m[0], m[1], m[3], m[4]) for m in mappings] == [
        ((os.makedev(8, 2), 173521), 0x400000, 0, "/usr/bin/python3"),
        ((os.makedev(0, 0x2D), 99), 0x7F0000000000, 0x1000, "/mnt/m/model weights.safetensors"),
    ]
    assert libraries == {"/usr/lib/libtorch_cpu.so.2"}
    smaps = (
        b"00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/python3\nSize: 328 kB\n"
        b"Rss:                 100 kB\n"
        b"7f0000000000-7f0040000000 r--s 00001000 00:2d 99 /mnt/m/model.safetensors\n"
        b"Size:            1048576 kB\nRss:              524288 kB\nPss: 1 kB\n"
    )
    assert mapping_rss(smaps, [0x7F0000000000, 0x400000, 0x1234]) == {
        0x7F0000000000: 524288 * 1024,
        0x400000: 100 * 1024,
    }
    fields = "S 1 2 3 4 5 6 10 20 30 40 100 200 300 400 0 0 7 0 12345"
    line = parse_stat(f"9 (a (b) c) {fields} 0 0".encode())
    assert (line.state, line.ppid, line.threads, line.start_ticks) == ("S", 1, 7, 12345)
    assert (line.counters.minor_faults, line.counters.major_faults) == (30, 70)


def test_kcmp_groups_descriptors_by_open_file_description(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"x" * 8192)
    first = os.open(path, os.O_RDONLY)
    again = os.dup(first)  # the same description
    other = os.open(path, os.O_RDONLY)  # a description of its own
    try:
        me = os.getpid()
        assert kcmp_same_file(me, first, me, again) is True
        assert kcmp_same_file(me, first, me, other) is False
        assert kcmp_same_file(me, first, me, 9999) is None  # not open
        groups = DescriptorGroups()
        found = [Descriptor(me, fd, 0, 0, 0) for fd in (first, again, other)]
        groups.update(found, {me: 1}, 1)
        assert sorted(sorted(g.members) for g in groups.groups) == [
            [(me, first), (me, again)],
            [(me, other)],
        ]
        os.lseek(first, 4096, os.SEEK_SET)  # a later look joins the same groups
        groups.update([Descriptor(me, first, 0, 4096, 0)], {me: 1}, 2)
        assert len(groups.groups) == 2
        assert max(g.max_position for g in groups.groups) == 4096
    finally:
        for fd in (first, again, other):
            os.close(fd)


def test_runs_of_pages() -> None:
    starts, counts = page_runs(np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 1], dtype=np.uint8))
    assert starts.tolist() == [1, 4, 7] and counts.tolist() == [2, 1, 3]
    offsets, lengths = merge_runs(np.array([8192, 0, 4096, 20480]), np.array([4096] * 4))
    assert offsets.tolist() == [0, 20480] and lengths.tolist() == [12288, 4096]


def test_arrivals_count_each_page_once_per_arrival_and_see_evictions(tmp_path: Path) -> None:
    from modelmon.core.watching.files import ModelFile

    path = tmp_path / "m.bin"
    size = 64 * PAGE_SIZE + 100  # a last page that is partly the file's
    path.write_bytes(os.urandom(size))
    cache.evict([path])
    stat = path.stat()
    model_file = ModelFile(0, str(path), size, (stat.st_dev, stat.st_ino), True)
    tracked = FileArrival(model_file, bins=8, align_pages=1)
    try:
        tracked.baseline(1)
        with open(path, "rb", buffering=0) as file:
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_RANDOM)  # no readahead
            file.seek(10 * PAGE_SIZE)
            file.read(3 * PAGE_SIZE)
            file.seek(40 * PAGE_SIZE)
            file.read(PAGE_SIZE)
        before = now_ns()
        found = tracked.scan()
        # From the baseline's look to when this scan had read the pages: they came between.
        assert found is not None and found.start_ns == 1 and before <= found.end_ns <= now_ns()
        assert found.first_bytes == 4 * PAGE_SIZE  # seen for the first time
        assert list(zip(found.offsets.tolist(), found.lengths.tolist(), strict=True)) == [
            (10 * PAGE_SIZE, 3 * PAGE_SIZE),
            (40 * PAGE_SIZE, PAGE_SIZE),
        ]
        assert tracked.jumps == 2  # neither run continued resident data
        assert tracked.scan() is None  # nothing new
        cache.evict([path])
        assert tracked.scan() is None and tracked.evicted_arrived_pages == 4
        path.read_bytes()
        again = tracked.scan()
        assert again is not None and again.bytes == size
        # The 4 pages back after their eviction are read again, not more of the model: a
        # cold start's phases add first arrivals up to the model's size, the last page's part.
        assert again.first_bytes == size - 4 * PAGE_SIZE
        assert tracked.arrived_bytes == 4 * PAGE_SIZE + size
        assert tracked.unique_arrived_bytes() == size
        # A bin all resident is looked at on its turn only, and always by the final scan.
        cache.evict([path])
        scans = [tracked.scan() for _ in range(FULL_BIN_TURNS)]
        assert scans == [None] * FULL_BIN_TURNS
        assert tracked.evicted_arrived_pages == 4 + tracked.pages  # every bin had its turn
        path.read_bytes()
        assert tracked.scan() is not None and tracked.resident_fraction() == 1.0
        cache.evict([path])
        dropped = tracked.evicted_arrived_pages
        tracked.scan(everything=True)  # the final scan: every bin, at once
        assert tracked.evicted_arrived_pages == dropped + tracked.pages
        assert tracked.resident_fraction() == 0.0
    finally:
        tracked.close()


def test_a_short_count_from_cachestat_moves_no_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cachestat undercounts a range that starts inside a large folio when it yields the CPU
    mid-walk: a bin it once calls empty keeps its pages (mincore says), and nothing arrives
    when the true count comes back."""
    from modelmon.core.watching import arrival
    from modelmon.core.watching.files import ModelFile

    path = tmp_path / "m.bin"
    path.write_bytes(os.urandom(64 * PAGE_SIZE))
    path.read_bytes()  # all resident: the watch's starting state
    stat = path.stat()
    tracked = FileArrival(
        ModelFile(0, str(path), 64 * PAGE_SIZE, (stat.st_dev, stat.st_ino), True),
        bins=8,
        align_pages=1,
    )
    counted = arrival.cached_in_range
    short = {"bin": 3}  # one short answer, for bin 3 (pages 24 to 32)

    def once_short(fd: int, offset: int, length: int) -> tuple[int, int] | None:
        found = counted(fd, offset, length)
        if found is not None and short and offset == 24 * PAGE_SIZE and length == 8 * PAGE_SIZE:
            short.clear()
            return 0, found[1]
        return found

    try:
        tracked.baseline(1)
        if not tracked.cachestat:
            pytest.skip("cachestat (Linux 6.5 and later) is not here")
        assert tracked.resident_before == 1.0
        monkeypatch.setattr(arrival, "cached_in_range", once_short)
        for _ in range(FULL_BIN_TURNS + 2):  # bin 3's turn comes, then the true count again
            tracked.scan()
        tracked.scan(everything=True)
        assert not short  # the short answer was given
        assert tracked.arrived_bytes == 0 and tracked.evicted_before_pages == 0
        assert tracked.resident_fraction() == 1.0
    finally:
        tracked.close()


@pytest.mark.parametrize(
    "pages", [0, 1, FOLIO_PAGES - 1, FOLIO_PAGES, 3 * FOLIO_PAGES + 5, 270_000, 4_000_001]
)
def test_bins_start_on_a_folio_so_no_count_starts_inside_one(pages: int) -> None:
    """cachestat undercounts a range that starts inside a large folio (when it yields the CPU
    mid-walk): every bin of a file starts on 2 MiB, at most MAX_BINS of them, covering it."""
    edges = bin_edges(pages, 256, FOLIO_PAGES)
    assert edges[0] == 0 and edges[-1] == pages and len(edges) - 1 <= 256
    assert np.all(edges[:-1] % FOLIO_PAGES == 0)
    assert np.all(np.diff(edges) > 0) or pages == 0
    steps = np.diff(edges[:-1])
    assert len(set(steps.tolist())) <= 1  # the same length, but the last


def test_arrivals_without_cachestat_scan_the_whole_file_with_mincore(tmp_path: Path) -> None:
    from modelmon.core.watching.files import ModelFile

    path = tmp_path / "m.bin"
    path.write_bytes(os.urandom(32 * PAGE_SIZE))
    cache.evict([path])
    stat = path.stat()
    tracked = FileArrival(ModelFile(0, str(path), 32 * PAGE_SIZE, (stat.st_dev, stat.st_ino), True))
    tracked.cachestat = False  # as on a kernel before 6.5
    try:
        tracked.baseline(1)
        with open(path, "rb", buffering=0) as file:
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
            file.seek(8 * PAGE_SIZE)
            file.read(2 * PAGE_SIZE)
        found = tracked.scan()
        assert found is not None
        assert (found.offsets.tolist(), found.lengths.tolist()) == (
            [8 * PAGE_SIZE],
            [2 * PAGE_SIZE],
        )
        assert tracked.mincore_pages == 2 * 32  # the whole file, at the baseline and the scan
    finally:
        tracked.close()


def test_tree_counts_exited_children_once_and_keeps_the_root_after_it_exits(
    tmp_path: Path,
) -> None:
    # Three children each read 8 MB, are seen by the tree, then exit and are reaped by their
    # parent: the kernel adds their counters to the parent's, and the tree must neither lose
    # nor double them. Each child says it read in one write to the pipe, which no other
    # child's write can split.
    go = tmp_path / "go"
    script = (
        "import os, sys, time\n"
        "for _ in range(3):\n"
        "    if os.fork() == 0:\n"
        "        fd = os.open('/dev/zero', os.O_RDONLY)\n"
        "        for _ in range(8): os.read(fd, 1 << 20)\n"
        "        os.write(1, b'read\\n')\n"  # one write: print's two would interleave
        f"        while not os.path.exists({str(go)!r}): time.sleep(0.005)\n"
        "        os._exit(0)\n"
        "for _ in range(3): os.wait()\n"
        "print('done', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    tree = ProcessTree(child.pid, attached=False, now_ns=time.perf_counter_ns())
    try:
        assert [child.stdout.readline() for _ in range(3)] == [b"read\n"] * 3
        tree.refresh(time.perf_counter_ns())
        assert len(tree.live()) == 4  # the children, seen alive with their 8 MB each
        go.touch()
        assert child.stdout.readline() == b"done\n"
        tree.refresh(time.perf_counter_ns())
        children = 24 << 20
        assert len(tree.live()) == 1
        assert children <= tree.totals().read_chars < children + (8 << 20)
        child.stdin.close()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not reaped yet
        tree.mark_exited(child.pid, time.perf_counter_ns())
        final = tree.totals()
        child.wait(30)
        assert not tree.live() and children <= final.read_chars < children + (8 << 20)
        tree.refresh(time.perf_counter_ns())
        assert tree.totals() == final  # kept after it was reaped
    finally:
        go.touch()
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stdout.close()
        tree.close()


def test_model_files_from_arguments_and_scope(tmp_path: Path) -> None:
    folder = tmp_path / "llama"
    folder.mkdir()
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        (folder / name).write_bytes(b"x" * 10)
    (folder / "config.json").write_text("{}")
    single = tmp_path / "tiny.gguf"
    single.write_bytes(b"x")
    argv = ["serve", f"--model={folder}", "-m", str(single), f"sh -c 'cat {single}'", "x.py"]
    models, notes = models_in_arguments(argv)
    found = [Path(p).name for p in named_files(models)]
    assert notes == []
    assert found == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "tiny.gguf",
    ]
    files = ModelFiles()
    files.add_named([str(folder / "model-00001-of-00002.safetensors")])
    # Named files make their folders the scope: a model-named file there counts, others not.
    assert files.consider(str(folder / "config.json")) is None
    assert files.consider(str(folder / "extra.safetensors")) is None  # does not exist
    (folder / "extra.safetensors").write_bytes(b"y")
    assert files.consider(str(folder / "extra.safetensors")) is not None
    assert files.consider(str(single)) is None  # outside the named model's folder
    unnamed = ModelFiles()
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "easy.pth").write_text("import x\n")
    assert unnamed.consider(str(site / "easy.pth")) is None  # a Python path file, not weights


def test_loader_from_command_lines_and_libraries() -> None:
    vllm = detect([["python", "-m", "vllm.entrypoints.openai.api_server"]], ["/x/libtorch_cpu.so"])
    assert vllm.key == "vllm" and "--safetensors-load-strategy eager" in fix("mmap", vllm)
    lib = "/v/site-packages/safetensors/_safetensors_rust.abi3.so"
    assert detect([["python", "load.py"]], [lib]).key == "safetensors"
    assert detect([["/usr/bin/llama-server", "-m", "x.gguf"]], []).key == "llama.cpp"
    assert "--load-mode none" in fix("mmap", detect([["llama-server"]], []))
    # fastsafetensors maps libtorch too: its own extension names it.
    fast = "/v/site-packages/fastsafetensors/cpp.cpython-311-x86_64-linux-gnu.so"
    assert detect([["python", "load.py"]], ["/x/libtorch_cpu.so", fast]).key == "fastsafetensors"
    plain = detect([["cat", "x"]], [])
    assert (plain.key, plain.label) == ("program", "cat")


def test_a_safetensors_fix_names_the_module_the_program_uses() -> None:
    lib = "/v/site-packages/safetensors/_safetensors_rust.abi3.so"
    numpy = fix("mmap", detect([["python", "load.py"]], [lib]))
    assert numpy.startswith("safetensors.numpy.load(open(path, 'rb').read())"), numpy
    torch = fix("mmap", detect([["python", "load.py"]], [lib, "/t/lib/libtorch_cpu.so"]))
    assert torch.startswith("safetensors.torch.load(open(path, 'rb').read())"), torch


def test_a_started_root_gone_before_the_first_look_is_named_by_its_argv() -> None:
    # A fast command may be a zombie (or gone) when the tree first reads it: /proc has no
    # argv for it then, and the watch names it by what it started.
    child = subprocess.Popen(["true"])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not yet reaped
        named = ProcessTree(child.pid, attached=False, now_ns=0, command=("true", "x"))
        unnamed = ProcessTree(child.pid, attached=False, now_ns=0)
        try:
            assert named.members[child.pid].command == ("true", "x")
            commands = [m.command for m in named.members.values()]
            assert detect(commands, []).label == "true"
            assert unnamed.members[child.pid].command == ()
        finally:
            named.close()
            unnamed.close()
    finally:
        child.wait()


# Starts a child, writes its pid, waits.
PARENT = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen(['sleep', '60'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def test_the_tree_claims_a_descendant_it_has_not_discovered_yet() -> None:
    """A child born between two looks is the tree's, not another process reading the model;
    this process (the root's parent) and init are not the tree's."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE)
    tree = None
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        tree = ProcessTree(parent.pid, attached=False, now_ns=0)
        assert child not in tree.members  # no look for children yet
        assert tree.claims(child) and tree.claims(parent.pid)
        assert not tree.claims(os.getpid()) and not tree.claims(1)
    finally:
        if tree is not None:
            tree.close()
        psutil.Process(parent.pid).children()[0].kill()
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


# Starts a child, writes its pid, and exits once told on stdin (its child goes on).
LEAVING_PARENT = (
    "import subprocess, sys\n"
    "child = subprocess.Popen(['sleep', '60'], stdin=subprocess.DEVNULL)\n"
    "print(child.pid, flush=True)\n"
    "sys.stdin.readline()\n"
)


def test_a_child_two_looks_missed_is_found_when_its_parent_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two quick looks may both come before a new child is linked to its parent, and no new
    pid follows it: the tree would never look again (a daemon's middle process was missed,
    the watch ended at the command's exit and stopped the daemon before it ran). The
    parent's end, which hands the child to the adopter as an orphan, makes it look again."""
    assert hold_subreaper()
    parent = subprocess.Popen(
        [sys.executable, "-c", LEAVING_PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert parent.stdin is not None and parent.stdout is not None
    tree, child = None, None
    try:
        child = int(parent.stdout.readline())
        tree = ProcessTree(parent.pid, attached=False, now_ns=now_ns())
        tree.adopt_orphans(os.getpid(), own_children)
        # Two looks while the child is not linked to its parent yet (as under load).
        listed = tree_module._children
        hidden = {child}
        monkeypatch.setattr(
            tree_module, "_children", lambda pid: [c for c in listed(pid) if c not in hidden]
        )
        tree.refresh(now_ns())
        tree.refresh(now_ns())
        assert child not in tree.members
        hidden.clear()
        parent.stdin.write(b"\n")
        parent.stdin.flush()
        os.waitid(os.P_PID, parent.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped yet
        tree.refresh(now_ns())
        assert child in tree.members and child in tree.adopted
    finally:
        if tree is not None:
            tree.close()
        if child is not None:
            os.kill(child, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # ours once adopted: reaped here
                os.waitpid(child, 0)
        parent.wait()
        parent.stdin.close()
        parent.stdout.close()
        release_subreaper()


def test_arrival_span_at_the_steady_rate() -> None:
    # 10 MB in the first 100 ms window at a steady 100 MB/s: the first byte came 100 ms
    # before that window's end; the last 5 MB took 50 ms of the last window.
    ms = 1_000_000
    windows = [(0, 100 * ms, 10_000_000), (100 * ms, 200 * ms, 10_000_000)]
    windows.append((200 * ms, 300 * ms, 5_000_000))
    assert arrival_span(windows) == (0, 250 * ms)
    late = [(0, 100 * ms, 2_000_000), (100 * ms, 200 * ms, 10_000_000)]
    assert arrival_span(late) == (80 * ms, 200 * ms)
    assert arrival_span([(5, 9, 1)]) == (5, 9)
    assert arrival_span([]) is None


@pytest.mark.parametrize("attached", [False, True])
def test_a_process_that_is_not_there(attached: bool) -> None:
    with pytest.raises(ProcessLookupError):
        ProcessTree(2**22 + 12345, attached=attached, now_ns=0)


@pytest.mark.parametrize(
    ("who", "why"),
    [
        ("self", "modelmon itself"),
        ("parent", "an ancestor of modelmon"),
        ("grandparent", "an ancestor of modelmon"),
        ("init", "init"),
        ("kthreadd", "a kernel thread"),
    ],
)
def test_a_watch_refuses_processes_it_would_wait_on_forever(who: str, why: str):
    """Itself, an ancestor (the shell it runs in) and init would never go quiet while it
    samples them, and never end before it does; a kernel thread loads no model."""
    pid = {
        "self": os.getpid(),
        "parent": os.getppid(),
        "grandparent": psutil.Process(os.getppid()).ppid(),
        "init": 1,
        "kthreadd": 2,
    }[who]
    if who == "grandparent" and pid <= 1:
        pytest.skip("pytest's parent is a child of init here: no grandparent to refuse")
    with pytest.raises(OptionsError, match=why):
        Watch(pid=pid)


def test_a_quiet_shorter_than_a_pause_between_reads_is_refused():
    with pytest.raises(OptionsError, match="a pause between two reads"):
        Watch(["true"], quiet_s=0)


def test_a_command_that_cannot_start_leaves_no_thread(tmp_path):
    """A program that is not there: one typed error, and the sampler that started first is
    stopped (the leak check fails a test that leaves a thread). A NUL byte in a word is
    refused before anything starts (test_arguments.py)."""
    missing = str(tmp_path / "no-such-program")
    with pytest.raises(WatchError, match=f"cannot run '{missing}': No such file"):
        Watch([missing, "a"]).run()
    with pytest.raises(WatchError, match="cannot run 'echo'"):
        Watch(["echo", "a\x00b"]).run()


def test_a_watch_refuses_a_zombie():
    """An exited process its parent has not reaped yet has nothing left to watch."""
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # exited, not reaped: a zombie, seen in /proc
        with open(f"/proc/{child.pid}/stat", "rb") as stat:
            if stat.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                break
        time.sleep(0.01)
    try:
        with pytest.raises(OptionsError, match="already exited"):
            Watch(pid=child.pid)
    finally:
        child.wait()


def test_a_process_of_another_user_is_said_in_one_sentence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its descriptors and mappings refused (as /proc refuses them for another user's
    process): one note names both and what to do, never a bare "mappings (...)"."""
    from modelmon.core.watching import openings

    def refused(path: object, *args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(openings.os, "listdir", refused)
    monkeypatch.setattr(openings, "open", refused, raising=False)
    seen = openings.look(os.getpid(), lambda path, identity: None, want_rss=True)
    assert seen is not None and not seen.descriptors and not seen.mappings
    assert seen.denied == (
        "cannot read the descriptors (/proc/PID/fd) and mappings (/proc/PID/maps) of a "
        "process of another user: run modelmon as that user or as root"
    )


SPAWNS_ON_A_LINE = (
    "import subprocess, sys, time\n"
    "sys.stdin.readline()\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def test_a_child_linked_after_its_pid_was_handed_out_is_still_discovered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel hands out a pid before it links the new process to its parent: a look that
    read the newest pid but listed the children a moment before the link skipped every later
    look while no other pid was handed out, and a daemon (fork, setsid, fork) was never
    found, outlived its watch and failed CI once. The look after one that saw a new pid looks
    again (here the newest pid stands still, as it did then)."""
    from modelmon.core.watching import tree as tree_module

    monkeypatch.setattr(tree_module, "_last_pid", lambda: 4242)
    parent = subprocess.Popen(
        [sys.executable, "-c", SPAWNS_ON_A_LINE], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    tree = None
    try:
        assert parent.stdin is not None and parent.stdout is not None
        tree = ProcessTree(parent.pid, attached=False, now_ns=0)
        tree.refresh(now_ns())  # sees the newest pid change: no child yet
        parent.stdin.write(b"\n")
        parent.stdin.flush()
        child = int(parent.stdout.readline())
        tree.refresh(now_ns())  # the same newest pid: looks again once
        assert child in tree.members
    finally:
        if tree is not None:
            tree.close()
        for process in psutil.Process(parent.pid).children():
            process.kill()
        parent.kill()
        parent.wait()
        for stream in (parent.stdin, parent.stdout):
            if stream is not None:
                stream.close()
