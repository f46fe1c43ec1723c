"""Suite-wide setup: Qt offscreen, and a check that no test leaks processes, threads or fds.

modelmon starts worker processes and threads and opens model files with their own fds; a
test that leaves any of these behind hides exactly the bugs the tool exists to find, and
makes later tests flaky. ``no_leaks`` fails such a test and names what it left behind.
Opt out with ``@pytest.mark.allow_leaks("why")``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import write_gguf_model, write_safetensors_model

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Every Python process the suite starts (CLI runs, programs it watches, engines) imports numpy,
# whose OpenBLAS spins up a thread per core for a tenth of a second of CPU: nothing here
# multiplies matrices (on two cores, a fifth of the CPU of the CLI's and the loads' tests).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .leaks import end_strays, find_leaks, reap_zombies, snapshot


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
