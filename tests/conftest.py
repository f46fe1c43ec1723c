"""Suite-wide setup: Qt offscreen, and a check that no test leaks processes, threads or fds.

modelmon starts worker processes and threads and opens model files with their own fds; a
test that leaves any of these behind hides exactly the bugs the tool exists to find, and
makes later tests flaky. ``no_leaks`` fails such a test and names what it left behind.
Opt out with ``@pytest.mark.allow_leaks("why")``.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import write_gguf_model, write_safetensors_model

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Every Python process the suite starts (CLI runs, programs it watches, engines) imports numpy,
# whose OpenBLAS spins up a thread per core for a tenth of a second of CPU: nothing here
# multiplies matrices (on two cores, a fifth of the CPU of the CLI's and the loads' tests).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

LEAK_GRACE_S = 2.0  # how long stragglers (exiting workers, joining threads) get

# Every process this test process starts inherits this mark in its environment, so that one
# which leaves the process tree (a daemon: setsid and a double fork, handed to init or to a
# subreaper above pytest) is still known as this process's: a leak the tree cannot show.
# Each pytest process (an xdist worker too) marks its own.
STRAY_MARK = "MODELMON_TEST_STARTER"
os.environ[STRAY_MARK] = str(os.getpid())


@dataclass(frozen=True)
class Snapshot:
    children: frozenset[tuple[int, str]]  # (pid, start time): a reused pid is a new process
    threads: frozenset[threading.Thread]
    fds: frozenset[tuple[int, str]]  # (fd, readlink target)
    strays: frozenset[tuple[int, str]]  # marked processes outside this process's tree


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[19]  # field 22, counted after "(comm)"


def _child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` from /proc (20x cheaper than psutil, which scans all pids)."""
    kids: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.extend(int(k) for k in f.read().split())
        except OSError:
            continue
    return kids


def _descendants() -> set[int]:
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):  # kernel without it
        import psutil

        return {p.pid for p in psutil.Process().children(recursive=True)}
    found: set[int] = set()
    todo = _child_pids(os.getpid())
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(_child_pids(pid))
    return found


def _ancestors() -> list[int]:
    """This process's ancestors up to init: where an orphan of its tree can be handed (the
    nearest subreaper above the process that died, else init)."""
    found: list[int] = []
    pid = os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError):
            break
        found.append(pid)
    return found


def _marked(pid: int) -> bool:
    mark = f"{STRAY_MARK}={os.getpid()}".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read().split(b"\0")
    except OSError:
        return False


def _strays(tree: set[int]) -> frozenset[tuple[int, str]]:
    """Processes this one started that left its tree: children of its ancestors (the only
    places an orphan can go) that carry this process's mark. Reads one environment per child
    of an ancestor, a few dozen on a test machine."""
    ancestors = _ancestors()
    found = set()
    for ancestor in ancestors:
        for pid in _child_pids(ancestor):
            if pid in tree or pid in ancestors or pid == os.getpid() or not _marked(pid):
                continue
            found.add((pid, _start_time(pid)))
    return frozenset(found)


def _interpreter_helpers() -> tuple[set[int], set[int]]:
    """Pids and fds of multiprocessing's resource tracker and forkserver.

    Each is started once, on first use, and lives as long as the interpreter by design:
    the test that happens to start one has not leaked it.
    """
    from multiprocessing import forkserver, resource_tracker

    tracker = resource_tracker._resource_tracker
    server = forkserver._forkserver
    pids = {tracker._pid, server._forkserver_pid}
    fds = {tracker._fd, server._forkserver_alive_fd}
    return {p for p in pids if p}, {f for f in fds if f is not None}


def snapshot() -> Snapshot:
    """What this process has open now: child processes, Python threads, file descriptors."""
    helper_pids, helper_fds = _interpreter_helpers()
    tree = _descendants()
    children = frozenset((p, _start_time(p)) for p in tree - helper_pids)
    threads = frozenset(t for t in threading.enumerate() if _thread_alive(t))
    fds = set()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in helper_fds:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the directory fd listdir used, closed by now
            continue
        if target.startswith("/dev/pts/"):  # the terminal, reopened by pytest's capture
            continue
        fds.add((fd, target))
    return Snapshot(frozenset(children), threads, frozenset(fds), _strays(tree))


def _thread_alive(thread: threading.Thread) -> bool:
    if isinstance(thread, threading._DummyThread):  # made for a foreign (e.g. Qt) thread,
        native = thread.native_id  # never removed from threading's table: ask the kernel
        return native is not None and os.path.exists(f"/proc/self/task/{native}")
    return thread.is_alive()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except OSError:
        return "(exited)"
    if state == "Z":
        return "(zombie: exited but never waited for)"
    return cmd[:200] or "(no cmdline)"


@dataclass(frozen=True)
class Leaks:
    children: frozenset[tuple[int, str]]
    threads: frozenset[threading.Thread]
    fds: frozenset[tuple[int, str]]
    strays: frozenset[tuple[int, str]] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.children or self.threads or self.fds or self.strays)

    def describe(self) -> list[str]:
        """One line per leak: pid and command line, thread name, fd and what it points to."""
        lines = [f"child process {pid}: {_cmdline(pid)}" for pid, _ in sorted(self.children)]
        lines += [
            f"thread {t.name!r} (ident {t.ident}, daemon={t.daemon})"
            for t in sorted(self.threads, key=lambda t: t.ident or 0)
        ]
        lines += [f"fd {fd} -> {target}" for fd, target in sorted(self.fds)]
        lines += [
            f"process {pid} out of the tree (a daemon left running): {_cmdline(pid)}"
            for pid, _ in sorted(self.strays)
        ]
        return lines


def _diff(now: Snapshot, before: Snapshot) -> Leaks:
    return Leaks(
        now.children - before.children,
        now.threads - before.threads,
        now.fds - before.fds,
        now.strays - before.strays,
    )


def find_leaks(before: Snapshot, grace: float | None = None) -> Leaks:
    """What was opened or started since ``before`` and is still there after ``grace`` s.

    Cheap when nothing leaked (one snapshot). Otherwise stragglers get ``grace`` seconds
    to finish, while finished multiprocessing children are reaped (``active_children``
    joins them) and a garbage collection closes files held only by reference cycles.
    """
    found = _diff(snapshot(), before)
    if not found:
        return found
    deadline = time.monotonic() + (LEAK_GRACE_S if grace is None else grace)
    gc.collect()
    while True:
        multiprocessing.active_children()
        found = _diff(snapshot(), before)
        if not found or time.monotonic() >= deadline:
            return found
        for thread in found.threads:
            if not isinstance(thread, threading._DummyThread):
                thread.join(timeout=max(0.0, min(0.05, deadline - time.monotonic())))
        time.sleep(0.02)


def end_strays(strays: Iterable[tuple[int, str]]) -> None:
    """SIGKILL reported strays that are still the processes seen (pid and start time), so
    that one test's daemon does not read beside the next tests."""
    for pid, started in strays:
        if _start_time(pid) == started and _marked(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def reap_zombies(pids: Iterable[int]) -> None:
    """Wait for those of ``pids`` that are zombies, so a reported leak doesn't linger."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                zombie = f.read().rpartition(")")[2].split()[0] == "Z"
            if zombie:
                os.waitpid(pid, os.WNOHANG)
        except (OSError, ChildProcessError):
            continue


@pytest.fixture(autouse=True)
def no_leaks(request: pytest.FixtureRequest):
    marker = request.node.get_closest_marker("allow_leaks")
    if marker is not None:
        if not (marker.args or marker.kwargs.get("reason")):
            pytest.fail(
                "@pytest.mark.allow_leaks needs a reason: allow_leaks('why')", pytrace=False
            )
        yield
        return
    before = snapshot()
    yield
    found = find_leaks(before)
    if found:
        lines = found.describe()
        reap_zombies(pid for pid, _ in found.children)
        end_strays(found.strays)
        pytest.fail(
            f"{request.node.nodeid} left behind (fix it, or mark the test "
            "@pytest.mark.allow_leaks('why')):\n  " + "\n  ".join(lines),
            pytrace=False,
        )


@pytest.fixture
def leak_check() -> SimpleNamespace:
    """The helpers behind ``no_leaks``, for tests of the checker itself."""
    return SimpleNamespace(
        snapshot=snapshot, find_leaks=find_leaks, reap_zombies=reap_zombies, end_strays=end_strays
    )


# --- model factories: small, real files made by the synth module ------------------------------


@pytest.fixture(scope="session")
def sharded_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-shard Llama-shaped F16 checkpoint (~6 MB) with its index."""
    folder = tmp_path_factory.mktemp("sharded")
    return write_safetensors_model(
        folder, layers=4, hidden=128, vocab=512, dtype="F16", shards=3, seed=1
    )


@pytest.fixture
def model_without_readahead() -> Iterator[Path]:
    """A small model in RAM (tmpfs, /dev/shm): storage without a readahead setting, so a
    readahead asked for cannot be set there by anyone."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    folder = Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        yield write_safetensors_model(folder, layers=1, hidden=32, vocab=64)
    finally:
        shutil.rmtree(folder)


@pytest.fixture(scope="session")
def bf16_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bf16")
    return write_safetensors_model(folder, layers=2, hidden=64, vocab=256, dtype="BF16", seed=2)


@pytest.fixture(scope="session")
def gguf_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """GGUF files with F32, F16, Q8_0 and Q4_K weights (norms are F32 in each)."""
    folder = tmp_path_factory.mktemp("gguf")
    return {
        kind: write_gguf_model(
            folder / f"model-{kind}.gguf", layers=2, hidden=256, vocab=512, tensor_type=kind, seed=3
        )
        for kind in ("F32", "F16", "Q8_0", "Q4_K")
    }


# --- a home where tools keep models: HF hub cache, Ollama, LM Studio --------------------------

HUB_COMMITS = {"acme/tiny-llama": "1" * 40, "acme/tiny-llama-GGUF": "2" * 40}
MODEL_STORE_VARIABLES = (
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_HOME",
    "XDG_CACHE_HOME",
    "OLLAMA_MODELS",
    "LLAMA_CACHE",
    "MODELMON_MODEL_DIRS",
)


def add_hub_repo(hub: Path, repo: str, commit: str, staged: Path) -> Path:
    """Lay out ``staged``'s files as huggingface_hub does: content-named blobs, a snapshot of
    relative symlinks to them, refs/main naming the commit. Returns the snapshot folder."""
    import hashlib

    repo_dir = hub / ("models--" + repo.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / commit
    (repo_dir / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    for file in sorted(staged.iterdir()):
        blob = repo_dir / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        file.rename(blob)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(commit)  # no newline, as huggingface_hub writes it
    return snapshot


def add_ollama_model(store: Path, name: str, tag: str, gguf: Path) -> Path:
    """A pulled Ollama model: the GGUF as blobs/sha256-HEX and a manifest naming it."""
    import hashlib
    import json

    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    (store / "blobs").mkdir(parents=True, exist_ok=True)
    blob = store / "blobs" / f"sha256-{digest}"
    size = gguf.stat().st_size
    gguf.rename(blob)
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    layers = [
        {
            "mediaType": "application/vnd.ollama.image.model",
            "digest": f"sha256:{digest}",
            "size": size,
        },
        {
            "mediaType": "application/vnd.ollama.image.license",
            "digest": "sha256:" + "0" * 64,
            "size": 9,
        },
    ]
    document = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "digest": "sha256:" + "1" * 64,
            "size": 2,
        },
        "layers": layers,
    }
    manifest.write_text(json.dumps(document))
    return manifest


@pytest.fixture
def model_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """HOME with a hub cache (a 2-shard safetensors repo, a GGUF repo with two quantizations),
    an Ollama store (tinyllama:latest) and an LM Studio folder; the environment points at
    them and at nothing else (HOME, HF_HUB_CACHE, OLLAMA_MODELS set; the rest unset)."""
    home = tmp_path / "home"
    hub = home / ".cache" / "huggingface" / "hub"
    ollama = home / "ollama-models"
    lmstudio = home / ".lmstudio" / "models"
    staged = tmp_path / "staged"
    tiny = {"layers": 1, "hidden": 64, "vocab": 128}
    write_safetensors_model(staged / "sharded", dtype="F16", shards=2, seed=5, **tiny)
    (staged / "sharded" / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    write_gguf_model(staged / "quants" / "tiny-Q8_0.gguf", tensor_type="Q8_0", seed=6, **tiny)
    write_gguf_model(staged / "quants" / "tiny-F16.gguf", tensor_type="F16", seed=6, **tiny)
    snapshots = {
        repo: add_hub_repo(hub, repo, HUB_COMMITS[repo], staged / folder)
        for repo, folder in (("acme/tiny-llama", "sharded"), ("acme/tiny-llama-GGUF", "quants"))
    }
    gguf = write_gguf_model(staged / "tinyllama.gguf", tensor_type="Q8_0", seed=7, **tiny)
    manifest = add_ollama_model(ollama, "tinyllama", "latest", gguf)
    studio = write_gguf_model(
        lmstudio / "acme" / "tiny-GGUF" / "tiny-Q8_0.gguf", tensor_type="Q8_0", seed=8, **tiny
    )
    for variable in MODEL_STORE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("OLLAMA_MODELS", str(ollama))
    return SimpleNamespace(
        home=home,
        hub=hub,
        ollama=ollama,
        lmstudio=lmstudio,
        snapshots=snapshots,
        commits=HUB_COMMITS,
        manifest=manifest,
        lmstudio_gguf=studio,
    )


# --- a device of the test's own (readahead is changed on it, never on the machine's disk) ---


def _run_tool(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def mounted_loop_disk(folder: Path) -> Iterator[Path]:
    """A folder on a 48 MB ext4 filesystem on a loop device of its own, its image and mount
    point in ``folder``; skips the test where no loop device can be made."""
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("losetup", "mkfs.ext4", "mount")):
        pytest.skip("needs root, losetup, mkfs.ext4 and mount")
    folder.mkdir(parents=True, exist_ok=True)
    image = folder / "disk.img"
    with open(image, "wb") as handle:
        handle.truncate(48 << 20)
    try:
        device = _run_tool("losetup", "--find", "--show", str(image))
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip(f"no loop device here: {exc}")
    mount_point = folder / "mnt"
    mount_point.mkdir()
    try:
        _run_tool("mkfs.ext4", "-q", "-F", device)
        _run_tool("mount", device, str(mount_point))
        try:
            yield mount_point
        finally:
            _run_tool("umount", str(mount_point))
    finally:
        _run_tool("losetup", "-d", device)


@pytest.fixture
def loop_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on an ext4 filesystem on a loop device made for this test."""
    with mounted_loop_disk(tmp_path) as mount_point:
        yield mount_point


def use_state(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Restore records, device locks and logs under ``state``, not the machine's /run."""
    (state / "locks").mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.setenv("MODELMON_RECORD_DIR", str(state / "records"))
    monkeypatch.setenv("MODELMON_LOCK_DIR", str(state / "locks"))


@pytest.fixture
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    use_state(state, monkeypatch)
    return state


@pytest.fixture(autouse=True, scope="session")
def machine_devices_untouched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The suite runs as root on a real machine: it may change the readahead of the loop
    devices and FUSE mounts it makes for itself, never of the machine's own disks (a recommend
    test would otherwise try four values on the disk everything else is reading from). Restore
    records, device locks and logs go to a folder of the test session, not the user's
    ~/.local/state or the machine's /run (other test sessions may run beside this one).
    Session-wide, so that it holds for module-scoped fixtures too (they are made before any
    function-scoped fixture of their first test)."""
    from modelmon.core.system.readahead import ReadaheadKnob

    own = ReadaheadKnob.unavailable

    def unavailable(knob: ReadaheadKnob) -> str | None:
        if not (knob.device.startswith("loop") or knob.fs_type.startswith("fuse")):
            return f"readahead of {knob.device}: the tests change only devices they made"
        return own(knob)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ReadaheadKnob, "unavailable", unavailable)
        if "MODELMON_LOCK_DIR" not in os.environ:
            use_state(tmp_path_factory.getbasetemp() / "state", patch)
        yield


# --- what this machine could not test ---------------------------------------------------------
# A skip names its reason; the whole feature a run skipped is said once at the end, so that a
# green run on a machine without root, FUSE, cgroups or Ray does not pass for a full one.
FEATURES = {
    "the Ray fleet": ("Ray ",),
    "FUSE mounts": ("FUSE", "rclone", "fusermount"),
    "memory and blkio cgroups": ("cgroup",),
    "what needs root": ("needs root", "run as root", "not root", "setpriv"),
    "loop devices": ("loop device",),
    "engines not installed": ("is not installed here", "backend is not installed"),
}


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = terminalreporter.stats.get("skipped", [])
    reasons = []
    for report in skipped:
        longrepr = report.longrepr
        reasons.append(str(longrepr[2] if isinstance(longrepr, tuple) else longrepr))
    found = {
        feature: sum(any(word in reason for word in words) for reason in reasons)
        for feature, words in FEATURES.items()
    }
    found = {feature: count for feature, count in found.items() if count}
    if found:
        terminalreporter.section("features this run did not test")
        for feature, count in found.items():
            terminalreporter.line(f"{feature}: {count} test(s) skipped (the SKIPPED lines say why)")


# --- object storage: S3-compatible servers on loopback, a fault-injecting proxy ----------------
# (tests/object_store.py; the servers live as long as the session)
from .object_store import (  # noqa: E402, F401
    bucket_root,
    faulty_s3,
    moto_s3,
    moto_server,
    rclone_s3,
    rclone_server,
)
