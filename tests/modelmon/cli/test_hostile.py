"""Hostile input, end to end: ``python -m modelmon`` in a subprocess, as a user would run it.

Every case ends with the documented exit code (cli/common.py's table) and exactly one line
on stderr, without hanging (HANG_S), and leaves every file the user has byte for byte as it
was (no file changed, none added, none removed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil
import pytest

from modelmon.core import write_safetensors_model
from modelmon.core.system import evict, residency_of

from .conftest import load_workers

# A bound a hang always reaches (a read of a FIFO, a wait with no way out) and no correct run
# comes near: a refusal takes an interpreter's start, 3-7 s with both cores busy elsewhere.
HANG_S = 60.0
USAGE, BAD_MODEL, LOAD_FAILED = 2, 3, 1
MODELMON = [sys.executable, "-m", "modelmon"]


def tree(root: Path) -> dict[str, str]:
    """What a user would notice: every entry under ``root`` and its content (or kind)."""
    seen: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            key = str(path.relative_to(root))
            if path.is_symlink():
                seen[key] = f"symlink to {os.readlink(path)}"
            elif path.is_file():
                seen[key] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen[key] = "dir" if path.is_dir() else "special"
    return seen


def hostile(
    root: Path,
    *args: str,
    code: int,
    says: str = "",
    timeout: float = HANG_S,
    preexec: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run modelmon; it must exit ``code`` with one stderr line (holding ``says``) without
    hanging, no traceback, and ``root`` unchanged."""
    before = tree(root)
    done = subprocess.run(
        [*MODELMON, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        preexec_fn=preexec,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, (args, done.returncode, done.stderr)
    assert len(lines) == 1, (args, done.stderr)
    assert says.lower() in lines[0].lower(), (args, lines[0])
    assert tree(root) == before, args
    return done


def safetensors_bytes(header: bytes, data: bytes = b"") -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def gguf_without_tensors() -> bytes:
    """A GGUF v3 with one KV and no tensors, like llama.cpp's vocab-only files."""
    key, value = b"general.architecture", b"llama"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<I", 8)
    kv += struct.pack("<Q", len(value)) + value
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    return write_safetensors_model(folder, layers=1, hidden=64, vocab=128)


# --- special files: never a hang, never an unbounded read ---------------------------------------


def test_special_files_are_refused_in_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.safetensors"
    os.mkfifo(fifo)
    (tmp_path / "to_fifo.gguf").symlink_to(fifo)
    (tmp_path / "to_zero.safetensors").symlink_to("/dev/zero")
    for target in (fifo, tmp_path / "to_fifo.gguf", tmp_path / "to_zero.safetensors"):
        for verb in ("inspect", "load"):
            hostile(tmp_path, verb, str(target), code=BAD_MODEL, says="not a regular file")
    hostile(tmp_path, "inspect", "/dev/zero", code=BAD_MODEL, says="not a regular file")


def test_special_index_files_are_refused_in_one_line(tmp_path: Path) -> None:
    fifo_dir, zero_dir = tmp_path / "fifo", tmp_path / "zero"
    fifo_dir.mkdir()
    zero_dir.mkdir()
    os.mkfifo(fifo_dir / "model.safetensors.index.json")
    (zero_dir / "model.safetensors.index.json").symlink_to("/dev/zero")
    for folder in (fifo_dir, zero_dir):
        hostile(tmp_path, "inspect", str(folder), code=BAD_MODEL, says="not a regular file")
        index = str(folder / "model.safetensors.index.json")
        hostile(tmp_path, "inspect", index, code=BAD_MODEL, says="not a regular file")


def test_a_fifo_ollama_manifest_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "ollama"
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest"
    manifest.parent.mkdir(parents=True)
    os.mkfifo(manifest)
    env = {**os.environ, "OLLAMA_MODELS": str(store)}
    before = tree(tmp_path)
    done = subprocess.run(
        [*MODELMON, "inspect", "ollama:tiny"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=env,
        check=False,
    )
    assert done.returncode == BAD_MODEL and len(done.stderr.strip().splitlines()) == 1
    assert "not a regular file" in done.stderr and tree(tmp_path) == before


# --- deep and huge JSON, text that is not UTF-8, paths the kernel refuses -----------------------

DEEP = 50_000


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (b'{"a":' + b"[" * DEEP + b"]" * DEEP + b"}", "nested too deep"),
        (b'{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,' + b"9" * 5000 + b"]}}", "digits"),
        (b'{"x\xff":{}}', "not valid UTF-8"),
    ],
    ids=["deep", "huge-integer", "not-utf8"],
)
def test_hostile_safetensors_headers(tmp_path: Path, header: bytes, says: str) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(safetensors_bytes(header))
    hostile(tmp_path, "inspect", str(path), code=BAD_MODEL, says=says)


@pytest.mark.parametrize(
    ("index", "says"),
    [
        (b'{"weight_map":' + b"[" * DEEP + b"]" * DEEP + b"}", "nested too deep"),
        (b'{"metadata":{"total_size":' + b"9" * 5000 + b"}}", "digits"),
        (b'{"weight_map":{"x":"\xff.safetensors"}}', "not UTF-8"),
    ],
    ids=["deep", "huge-integer", "not-utf8"],
)
def test_hostile_shard_indexes(tmp_path: Path, index: bytes, says: str) -> None:
    path = tmp_path / "model.safetensors.index.json"
    path.write_bytes(index)
    hostile(tmp_path, "inspect", str(path), code=BAD_MODEL, says=says)
    hostile(tmp_path, "inspect", str(tmp_path), code=BAD_MODEL, says=says)


def test_paths_the_kernel_refuses(tmp_path: Path) -> None:
    loop = tmp_path / "loop.safetensors"
    loop.symlink_to(loop)
    hostile(tmp_path, "inspect", str(loop), code=BAD_MODEL, says="symbolic links")
    hostile(tmp_path, "load", str(loop), code=BAD_MODEL, says="symbolic links")
    long_name = str(tmp_path / ("x" * 5000))
    hostile(tmp_path, "inspect", long_name, code=BAD_MODEL, says="too long")


# --- what a file is, said: special files, /proc and /sys, descriptors, odd names ----------------


def test_a_folder_says_what_its_model_file_is(tmp_path: Path) -> None:
    """Not "holds no .safetensors file": the one it holds is a loop, a FIFO, a socket..."""
    cases = {"loop": "a symlink loop", "fifo": "(a FIFO)", "socket": "(a socket)"}
    cases |= {"device": "(a character device)", "broken": "a broken symlink"}
    for kind, says in cases.items():
        folder = tmp_path / kind
        folder.mkdir()
        target = folder / "model.safetensors"
        if kind == "loop":
            target.symlink_to(target)
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "socket":
            listener = socket.socket(socket.AF_UNIX)
            listener.bind(str(target))
            listener.close()
        elif kind == "device":
            target.symlink_to("/dev/null")
        else:
            target.symlink_to("gone.safetensors")
        says = f"model.safetensors is {says}" if kind in ("loop", "broken") else says
        hostile(tmp_path, "inspect", str(folder), code=BAD_MODEL, says=says)
        hostile(tmp_path, "load", str(folder), code=BAD_MODEL, says=says)
    hostile(tmp_path, "inspect", "/dev/null", code=BAD_MODEL, says="(a character device)")


def test_proc_and_sys_files_are_named_for_what_they_are(tmp_path: Path) -> None:
    """/sys says 4096 bytes and /proc 0 whatever they hold: no parse may trust that size."""
    sys_file = next(Path("/sys/block").glob("*/queue/read_ahead_kb"), None)
    for path in (Path("/proc/self/status"), sys_file):
        if path is not None:
            says = f"a /{path.parts[1]} file, whose size is not what it holds"
            hostile(tmp_path, "inspect", str(path), code=BAD_MODEL, says=says)


def test_descriptor_paths_name_the_file_they_have_open(model: Path, tmp_path: Path) -> None:
    """/proc/self/fd/N means another file in each worker: the path it names is used."""
    descriptor = os.open(model, os.O_RDONLY)
    read_end, write_end = os.pipe()
    gone = tmp_path / "gone.safetensors"
    gone.write_bytes(model.read_bytes())
    deleted = os.open(gone, os.O_RDONLY)
    gone.unlink()
    try:
        for path, code, says in (
            (f"/proc/self/fd/{descriptor}", 0, ""),
            (f"/dev/fd/{descriptor}", 0, ""),
            (f"/dev/fd/{read_end}", BAD_MODEL, "a descriptor of a pipe"),
            (f"/proc/self/fd/{deleted}", BAD_MODEL, "deleted"),
        ):
            done = subprocess.run(
                [*MODELMON, "load", path, "--cache", "keep"],
                capture_output=True,
                text=True,
                timeout=30,
                pass_fds=(descriptor, read_end, deleted),
                check=False,
            )
            assert done.returncode == code, (path, done.stderr)
            assert len(done.stderr.strip().splitlines()) == (1 if says else 0), done.stderr
            assert says in done.stderr and "Traceback" not in done.stderr
    finally:
        for fd in (descriptor, read_end, write_end, deleted):
            os.close(fd)


def test_a_byte_swapped_gguf_is_named(tmp_path: Path) -> None:
    path = tmp_path / "swapped.gguf"
    path.write_bytes(b"FUGG" + gguf_without_tensors()[4:])
    hostile(tmp_path, "inspect", str(path), code=BAD_MODEL, says="a byte-swapped GGUF")


def test_a_truncated_gguf_is_called_truncated(tmp_path: Path) -> None:
    """Counts the file has no room for, in a file cut short: "truncated", with both sizes."""
    head = b"GGUF" + struct.pack("<IQQ", 3, 147, 3)
    path = tmp_path / "cut.gguf"
    path.write_bytes(head + b"\0" * (1000 - len(head)))
    done = hostile(tmp_path, "inspect", str(path), code=BAD_MODEL, says="truncated")
    assert "which take at least 3591 bytes, but the file has 1000" in done.stderr


def test_control_characters_in_a_path_stay_on_one_line(tmp_path: Path) -> None:
    """A newline, a carriage return or a terminal escape in a name: one stderr line, escaped."""
    for name in ("a\nb.safetensors", "c\rd\u2028e.safetensors", "f\x1b[31mg.safetensors"):
        path = tmp_path / name
        path.write_bytes(b"junk")
        for verb in ("inspect", "load"):
            done = hostile(tmp_path, verb, str(path), code=BAD_MODEL, says="too short")
            assert ascii(name)[1:-1] in done.stderr
        path.unlink()
    folder = tmp_path / "x\ny"
    folder.mkdir()
    hostile(tmp_path, "inspect", str(folder), code=BAD_MODEL, says="x\\ny: directory holds no")


# --- numbers: non-finite, negative, digits int() refuses ----------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        ("load", "--chunk-mib", "nan"),
        ("load", "--chunk-mib", "inf"),
        ("load", "--chunk-mib", "-1"),
        ("load", "--workers", "²"),
        ("load", "--threads", "0"),
        ("load", "--interval-ms", "nan"),
        ("bench", "--a", "sequential workers=²", "--b", "pread"),
        ("bench", "--a", "sequential chunk=²MiB", "--b", "pread"),
        ("bench", "--a", "sequential chunk=" + "9" * 400, "--b", "pread"),
        ("bench", "--a", "sequential readahead=²", "--b", "pread"),
        ("bench", "--a", "sequential readahead=٣", "--b", "pread"),
        ("load", "--readahead", "1e3"),
        ("load", "--readahead", "²"),
        ("bench", "--a", "sequential", "--b", "pread", "-n", "0"),
        ("recommend", "--budget", "-5"),
        ("recommend", "--budget", "nan"),
        ("recommend", "--budget", "inf"),
        ("recommend", "--workers", "0"),
        ("recommend", "--memory-limit", "²GiB"),
        ("recommend", "-o", ""),
    ],
    ids=lambda flags: " ".join(flags)[:40],
)
def test_impossible_numbers_are_usage_errors(model: Path, flags: Sequence[str]) -> None:
    verb, *rest = flags
    hostile(model.parent, verb, str(model), *rest, code=USAGE)


@pytest.mark.parametrize(
    "flags",
    [
        ("load", "--readahead", "1e3"),
        ("load", "--readahead", "²"),
        ("bench", "--a", "sequential readahead=²", "--b", "pread"),
        ("bench", "--a", "sequential readahead=٣", "--b", "pread"),
        ("bench", "--a", "sequential --readahead ٣", "--b", "pread"),
    ],
    ids=lambda flags: " ".join(flags)[:40],
)
def test_readahead_refusals_say_the_allowed_range(model: Path, flags: Sequence[str]) -> None:
    verb, *rest = flags
    hostile(model.parent, verb, str(model), *rest, code=USAGE, says="from 0 to 1048576")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_config_chunk_that_is_no_number_is_a_usage_error(
    model: Path, tmp_path: Path, value: str
) -> None:
    config = tmp_path / "modelmon.toml"
    config.write_text(
        f'format_version = 1\n[recommended]\nstrategy = "pread"\nchunk_mib = {value}\n'
    )
    hostile(tmp_path, "load", str(model), "--config", str(config), code=USAGE, says="chunk_mib")


# --- thousands of shards under a low open-files limit --------------------------------------------

SHARDS = 600
LOW_LIMIT = 128


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index over SHARDS one-tensor shards: more files than LOW_LIMIT descriptors."""
    folder = tmp_path_factory.mktemp("shards")
    weight_map = {}
    for number in range(SHARDS):
        name = f"model-{number:05d}-of-{SHARDS:05d}.safetensors"
        entry = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}
        header = json.dumps({f"t{number}": entry}).encode()
        (folder / name).write_bytes(safetensors_bytes(header, bytes(16)))
        weight_map[f"t{number}"] = name
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": weight_map}))
    return index


def _limit_open_files(soft: int, hard: int | None) -> Callable[[], None]:
    def limit() -> None:
        _, current_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, current_hard if hard is None else hard))

    return limit


@pytest.mark.parametrize("strategy", ["mmap-shared-fd", "sequential", "mmap", "library"])
def test_many_shards_under_a_low_open_files_limit(many_shards: Path, strategy: str) -> None:
    """The soft limit is raised to the hard one where that is enough; where it is not, one
    line says how many descriptors the load needs."""
    load = ("load", str(many_shards), "-s", strategy, "--cache", "keep", "--json")
    done = subprocess.run(
        [*MODELMON, *load],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_open_files(LOW_LIMIT, None),
        check=False,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert json.loads(done.stdout)["status"] == "ok"
    if strategy != "library":  # safetensors keeps no descriptor per file
        says = "ulimit -n"
        hard = _limit_open_files(LOW_LIMIT, LOW_LIMIT)
        done = hostile(many_shards.parent, *load, code=LOAD_FAILED, says=says, preexec=hard)
        assert f"over {SHARDS} files" in done.stderr and "Traceback" not in done.stderr
    inspect = ("inspect", str(many_shards))
    hard = _limit_open_files(LOW_LIMIT, LOW_LIMIT)
    done = subprocess.run(
        [*MODELMON, *inspect], capture_output=True, text=True, timeout=30, preexec_fn=hard
    )
    assert done.returncode == 0 and not done.stderr, done.stderr


# --- shapes numpy cannot allocate: refused when the file is parsed, naming the tensor ----------


@pytest.mark.parametrize(
    ("shape", "says"),
    [([1] * 65, "65 dimensions"), ([0, 1 << 62, 4], "absurd shape")],
    ids=["65-dims", "past-int64"],
)
def test_impossible_shapes_are_refused_at_inspect(tmp_path: Path, shape: list[int], says: str):
    entry = {"dtype": "F32", "shape": shape, "data_offsets": [0, 4 if shape[0] else 0]}
    header = json.dumps({"odd.weight": entry}).encode()
    path = tmp_path / "m.safetensors"
    path.write_bytes(safetensors_bytes(header, b"\0" * entry["data_offsets"][1]))
    done = hostile(tmp_path, "inspect", str(path), code=BAD_MODEL, says=says)
    assert "odd.weight" in done.stderr


# --- zero-byte models: they open, but nothing loads them ----------------------------------------


def test_a_model_without_tensors_inspects_but_is_never_measured(tmp_path: Path) -> None:
    path = tmp_path / "vocab.gguf"
    path.write_bytes(gguf_without_tensors())
    done = subprocess.run(
        [*MODELMON, "inspect", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tensors"] == 0
    for args in (
        ("load", str(path)),
        ("load", str(path), "--discard"),
        ("bench", str(path), "--a", "sequential", "--b", "pread", "-n", "1"),
        ("recommend", str(path), "--budget", "5"),
        ("recommend", str(path), "-o", str(tmp_path / "out.toml")),
    ):
        hostile(tmp_path, *args, code=BAD_MODEL, says="holds no tensor data")


# --- outputs: never one of the inputs, never where nothing can be written -----------------------


def test_recommend_refuses_outputs_that_are_inputs(model: Path, tmp_path: Path) -> None:
    (tmp_path / "link.toml").symlink_to(model)
    os.link(model, tmp_path / "hard.toml")
    for output in (model, tmp_path / "link.toml", tmp_path / "hard.toml"):
        args = ("recommend", str(model), "-o", str(output))
        hostile(tmp_path, *args, code=USAGE, says="is the input")


def test_recommend_refuses_outputs_it_cannot_write(model: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    for output, says in (
        (tmp_path, "is a directory"),
        (blocker / "out.toml", "cannot write"),
        (tmp_path / "missing" / "out.toml", "cannot write"),
        (tmp_path / ("x" * 300 + ".toml"), "cannot write"),
        (Path("/proc/modelmon.toml"), "cannot write"),
    ):
        hostile(tmp_path, "recommend", str(model), "-o", str(output), code=USAGE, says=says)


# --- an address-space limit below the file size -------------------------------------------------


def test_an_address_space_limit_below_the_model_is_one_line(tmp_path: Path) -> None:
    """``ulimit -v`` smaller than the file: a worker cannot hold it; one line, no traceback."""
    limit = 1536 << 20  # room for the interpreter and numpy, not for the model
    path = tmp_path / "big.safetensors"
    size = limit + (256 << 20)
    header = json.dumps({"w": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}})
    with open(path, "wb") as out:
        out.write(safetensors_bytes(header.encode()))
        out.truncate(out.tell() + size)  # sparse: no disk used, reads give zeros

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    cases = (
        (("inspect", str(path)), 0, ""),
        (("load", str(path), "--cache", "keep"), LOAD_FAILED, "would not fit"),
        (("load", str(path), "-s", "mmap", "--cache", "keep", "--discard"), LOAD_FAILED, "memory"),
    )
    for args, code, says in cases:
        done = subprocess.run(
            [*MODELMON, *args],
            capture_output=True,
            text=True,
            timeout=30,
            preexec_fn=cap,
            check=False,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == code, done.stderr
        assert len(lines) == (1 if says else 0) and "Traceback" not in done.stderr, done.stderr
        assert says in done.stderr


# --- signals and faults while a load runs -------------------------------------------------------

SLOW_LOAD = ("-s", "pread", "-w", "1", "-t", "1", "--fadvise", "random", "--discard")
READING = 0.05  # of the model in the page cache after a cold start: the load is reading


class Running:
    """modelmon started in the background on a model evicted from the page cache first, so
    the model's residency says when the load reads it (a state, not a time)."""

    def __init__(self, model: Path, *args: str) -> None:
        self.model = str(model)
        evict([self.model])
        self.process = subprocess.Popen(
            [*MODELMON, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.parent = psutil.Process(self.process.pid)
        self.workers: set[psutil.Process] = set()

    def _note_workers(self) -> None:
        with contextlib.suppress(psutil.Error):
            self.workers.update(load_workers(self.parent))

    def wait_until_reading(self) -> None:
        """Poll for the state (the model being read), capped so a broken run fails."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self._note_workers()
            if residency_of([self.model]) >= READING:
                return
            assert self.process.poll() is None, self.process.communicate()
            time.sleep(0.02)
        raise AssertionError("the model was never read")

    def finish(self, code: int, says: str) -> str:
        out, err = self.process.communicate(timeout=60)
        lines = err.strip().splitlines()
        assert self.process.returncode == code, err
        assert len(lines) == 1 and says in lines[0], err  # no resource-tracker warning either
        _, alive = psutil.wait_procs(self.workers, timeout=HANG_S)
        assert not alive, f"orphaned workers: {alive}"
        return out


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("slow")
    return write_safetensors_model(folder, layers=1, hidden=1024, vocab=4096, dtype="F16")


@pytest.mark.parametrize(("number", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("verb", ["load", "recommend"])
def test_ctrl_c_and_sigterm_stop_cleanly(
    slow_model: Path, verb: str, number: signal.Signals, code: int
) -> None:
    """The signal ends the command, not the work's end: the load's workers are frozen
    (SIGSTOP) before it, so the load can never end by itself, and the search has an hour
    of budget left; a command that waited for either outlives the 60 s ``finish`` gives it."""
    flags = (*SLOW_LOAD, "--chunk-mib", "0.00390625") if verb == "load" else ("--budget", "3600")
    before = tree(slow_model.parent)
    running = Running(slow_model, verb, str(slow_model), *flags)
    running.wait_until_reading()
    if verb == "load":
        assert running.workers  # a test that froze none could not see the hang it guards
        for worker in running.workers:
            worker.send_signal(signal.SIGSTOP)
    running.process.send_signal(number)
    running.finish(code, "cancelled")
    assert tree(slow_model.parent) == before


def test_truncated_mid_load_through_the_cli(tmp_path: Path) -> None:
    path = write_safetensors_model(tmp_path, layers=1, hidden=1024, vocab=4096, dtype="F16")
    running = Running(path, "load", str(path), *SLOW_LOAD, "--chunk-mib", "0.00390625")
    running.wait_until_reading()
    os.truncate(path, 4096)
    running.finish(LOAD_FAILED, "truncated during the load")


def test_deleted_mid_load_through_the_cli(tmp_path: Path) -> None:
    path = write_safetensors_model(tmp_path, layers=1, hidden=1024, vocab=4096, dtype="F16")
    running = Running(path, "load", str(path), *SLOW_LOAD, "--chunk-mib", "0.015625", "--json")
    running.wait_until_reading()
    path.unlink()
    out = running.finish(LOAD_FAILED, "deleted or replaced during the load")
    document = json.loads(out)  # strict JSON: json.loads would take NaN, so look for null
    assert document["cache"]["resident_after"] is None and "NaN" not in out


# --- options a strategy does not use ------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "ignored"),
    [
        (("-s", "pread", "--madvise", "random"), "madvise=random"),
        (("-s", "sequential", "--prefetch", "willneed"), "prefetch=willneed"),
    ],
)
def test_unused_load_options_are_reported_as_ignored(
    model: Path, flags: tuple[str, ...], ignored: str
) -> None:
    done = hostile(model.parent, "load", str(model), *flags, "--json", code=0, says=ignored)
    assert "ignored" in done.stderr
    assert json.loads(done.stdout)["ignored_options"] == [ignored]


def test_a_bench_specs_own_cache_is_reported_as_ignored(model: Path) -> None:
    args = ("bench", str(model), "--a", "pread cache=warm", "--b", "sequential", "-n", "1")
    done = hostile(model.parent, *args, "--json", code=0, says="cache=warm", timeout=30)
    assert "--a" in done.stderr and "--b" not in done.stderr
