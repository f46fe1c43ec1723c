"""A small server's cold start, the test bed of ``watch``'s ready, phases and ranks.

    python serve_bed.py MODEL [--ranks N] [--mode whole|slice] [--import-s S] [--other-mb M]
                              [--post-s S] [--slow-rank R --slow-mbps X] [--die-rank R]
                              [--dist pipes|gloo] [--listen-early | --lazy | --never-ready]
                              [--phase-lines [--prefetch] [--idle-s S]] [--compile-s S]
                              [--sleep-steps]

It starts as a server does: imports and set-up (``--import-s`` of CPU, ``--other-mb`` of other
files read: the standard library's sources), the weights (each rank a process, as torchrun
starts them, with RANK, LOCAL_RANK and WORLD_SIZE in its environment), a CPU-bound
post-processing step (``--post-s``), then it listens on a free loopback port and answers
``GET /health`` with 200, until it is stopped.

- ``whole``: every rank reads every tensor whole and keeps its 1/N rows (as engines that
  narrow each tensor after reading it): ranks hold the whole model until all have read it
  (they wait for one another, as a collective after loading does).
- ``slice``: every rank reads only its rows of each tensor (safetensors' ``get_slice``; on a
  bucket, ranged GETs of them).

MODEL: a ``.safetensors`` file, a shard index (``*.safetensors.index.json``) or an ``s3://``
URL of one file (boto3, the AWS configuration of the environment).

Its own timeline goes to stderr as ``serve_bed: EVENT SECONDS [rank R]``, seconds since the
server's process started (its ``/proc/self/stat`` start, the clock the kernel keeps); the port
to stdout as ``serve_bed: listening on PORT``. ``--dist gloo`` joins the ranks with
torch.distributed's gloo backend instead of pipes (its store listens before any weight).

``--phase-lines`` prints its phases to stdout as vLLM 0.32 prints its own, each timed by its
own clock ("Loading weights took 1.23 seconds" after the weights, "init engine (profile,
create kv cache, warmup model) took 0.50 s" after the post-processing); ``--prefetch`` reads
each weight file through once (at ``--pace-mbps``) before that clock starts, as vLLM's
prefetch strategy fills the page cache first, so the bytes arrive before the clock it
reports; ``--idle-s`` waits before it listens, in no line.

``--compile-s`` compiles as an engine does after its weights: ``S`` seconds of CPU, whose
result it writes into ``$VLLM_CACHE_ROOT`` (or ``~/.cache/serve_bed``) and finds there at its
next start, which then only reads it ("torch.compile took ... s in total" either way).

``--sleep-steps`` waits out the import, compile and post-processing steps on the clock
instead of computing them: a test that judges changes by the time to ready then does not
hang on what its neighbours do with the machine's cores.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

T0_VARIABLE = "SERVE_BED_T0"  # the server's start (CLOCK_BOOTTIME s), handed to its ranks
CLIENTS: list[object] = []
SLEEP_STEPS = "--sleep-steps" in sys.argv


def process_start() -> float:
    """When this process started, on CLOCK_BOOTTIME (as /proc/self/stat counts it)."""
    with open("/proc/self/stat", "rb") as stat:
        data = stat.read()
    ticks = int(data[data.rindex(b")") + 2 :].split()[19])
    return ticks / os.sysconf("SC_CLK_TCK")


T0 = float(os.environ.get(T0_VARIABLE) or process_start())


def say(event: str, rank: int | None = None) -> None:
    elapsed = time.clock_gettime(time.CLOCK_BOOTTIME) - T0
    where = "" if rank is None else f" rank {rank}"
    # One write a line: the ranks share the server's standard error.
    os.write(2, f"serve_bed: {event} {elapsed:.3f}{where}\n".encode())


def busy(seconds: float) -> None:
    """Compute for ``seconds`` of this process's CPU time (one core): on a machine whose cores
    are busy it takes longer, but it computes until it is done, so the moment it says it is
    done is when it stopped computing (a wall-clock deadline may pass while it waits for a
    core, and its last stretch is then no computing at all)."""
    if SLEEP_STEPS:
        time.sleep(seconds)
        return
    deadline = time.process_time() + seconds
    value = 0
    while time.process_time() < deadline:
        for number in range(20000):
            value ^= number * number
    if value == -1:
        print(value)


def read_other_files(megabytes: float) -> int:
    """Read the standard library's sources until ``megabytes`` MB were read (as imports do)."""
    want, got = megabytes * 1e6, 0
    for folder, folders, names in os.walk(Path(os.__file__).parent):
        folders[:] = sorted(f for f in folders if f not in ("site-packages", "test"))
        for name in sorted(names):
            if got >= want:
                return got
            if name.endswith(".py"):
                try:
                    got += len(Path(folder, name).read_bytes())
                except OSError:
                    continue
    return got


# --- the weights -----------------------------------------------------------------------------


def files_of(model: str) -> list[str]:
    """The weight files of a model file or a shard index."""
    if model.endswith(".index.json"):
        index = json.loads(Path(model).read_text())
        folder = Path(model).parent
        return [str(folder / name) for name in dict.fromkeys(index["weight_map"].values())]
    return [model]


class Pace:
    """Reads no faster than ``mbps`` (None: as fast as they go)."""

    def __init__(self, mbps: float | None) -> None:
        self.mbps, self.start, self.count = mbps, time.monotonic(), 0

    def took(self, count: int) -> None:
        self.count += count
        if self.mbps:
            ahead = self.count / (self.mbps * 1e6) - (time.monotonic() - self.start)
            if ahead > 0:
                time.sleep(ahead)


def rows_of(length: int, rank: int, ranks: int) -> tuple[int, int]:
    per = -(-length // ranks)
    return min(length, rank * per), min(length, (rank + 1) * per)


def load_local(files: list[str], mode: str, rank: int, ranks: int, pace: Pace, die: float | None):
    import numpy as np
    from safetensors import safe_open

    kept, read = {}, 0
    for file in files:
        with safe_open(file, framework="np") as opened:
            for name in opened.keys():  # noqa: SIM118 - safe_open has no __iter__
                if mode == "whole":
                    tensor = opened.get_tensor(name)  # read whole
                    kept[name] = tensor
                    count = tensor.nbytes
                else:
                    part = opened.get_slice(name)
                    shape = part.get_shape()
                    if not shape:
                        tensor = opened.get_tensor(name)
                    else:
                        low, high = rows_of(shape[0], rank, ranks)
                        tensor = np.ascontiguousarray(part[low:high])
                    kept[name] = tensor
                    count = tensor.nbytes
                read += count
                pace.took(count)
                if die is not None and read >= die:
                    os.kill(os.getpid(), signal.SIGKILL)
    return kept


def load_bucket(url: str, mode: str, rank: int, ranks: int, pace: Pace, die: float | None):
    import boto3
    import numpy as np
    from botocore.config import Config

    bucket, _, key = url.removeprefix("s3://").partition("/")
    client = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
    CLIENTS.append(client)  # its connection stays open, as a server's client's does
    kept, read = {}, 0

    def get(first: int, last: int) -> bytes:
        body = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{last}")["Body"]
        return body.read()

    size_bytes = get(0, 7)
    header_size = int.from_bytes(size_bytes, "little")
    header = json.loads(get(8, 8 + header_size - 1))
    header.pop("__metadata__", None)
    base = 8 + header_size
    dtypes = {"F16": np.float16, "BF16": np.uint16, "F32": np.float32, "I64": np.int64}
    if mode == "whole":
        data = b""
        part = 16 << 20
        total = max(end for _, (_, end) in ((n, e["data_offsets"]) for n, e in header.items()))
        for first in range(0, total, part):
            chunk = get(base + first, base + min(total, first + part) - 1)
            data += chunk
            read += len(chunk)
            pace.took(len(chunk))
            if die is not None and read >= die:
                os.kill(os.getpid(), signal.SIGKILL)
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype, shape = np.dtype(dtypes[entry["dtype"]]), entry["shape"]
        if mode == "whole":
            whole = np.frombuffer(data, dtype, count=(end - begin) // dtype.itemsize, offset=begin)
            kept[name] = whole.reshape(shape)
            continue
        low, high = rows_of(shape[0], rank, ranks) if shape else (0, 1)
        row = (end - begin) // max(1, shape[0]) if shape else end - begin
        if high > low:
            chunk = get(base + begin + low * row, base + begin + high * row - 1)
            read += len(chunk)
            pace.took(len(chunk))
            kept[name] = np.frombuffer(chunk, dtype).reshape([high - low, *shape[1:]])
    return kept


def narrow(kept: dict, rank: int, ranks: int) -> dict:
    """Keep this rank's rows of each tensor (a copy), the whole tensors go."""
    import numpy as np

    mine = {}
    for name in list(kept):
        tensor = kept.pop(name)
        if tensor.ndim:
            low, high = rows_of(tensor.shape[0], rank, ranks)
            mine[name] = np.array(tensor[low:high])
        else:
            mine[name] = tensor
    return mine


def run_rank(args: argparse.Namespace, rank: int, ranks: int, to_parent, from_parent) -> dict:
    say("rank-started", rank)
    if args.dist == "gloo":
        import torch.distributed as dist

        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}",
            rank=rank,
            world_size=ranks,
        )
    pace = Pace(args.slow_mbps if rank == args.slow_rank else args.pace_mbps)
    die = args.die_after_mb * 1e6 if rank == args.die_rank else None
    say("first-byte", rank)
    if args.prefetch and not args.model.startswith("s3://"):
        for file in files_of(args.model):  # at the pace asked; the load after it is not
            with open(file, "rb", buffering=0) as whole:
                while chunk := whole.read(8 << 20):
                    pace.took(len(chunk))
        pace = Pace(None)
    clock = time.perf_counter()
    if args.model.startswith("s3://"):
        kept = load_bucket(args.model, args.mode, rank, ranks, pace, die)
    else:
        kept = load_local(files_of(args.model), args.mode, rank, ranks, pace, die)
    say("last-byte", rank)
    log_line(args, f"Loading weights took {time.perf_counter() - clock:.2f} seconds")
    if args.mode == "whole" and ranks > 1:
        # Every rank holds the whole model until all have read it, as a collective after
        # loading makes them: then each keeps its part.
        if args.dist == "gloo":
            import torch.distributed as dist

            dist.barrier()
        elif to_parent is not None:
            to_parent.write(b"loaded\n")
            to_parent.flush()
            if from_parent.readline() != b"go\n":
                sys.exit(3)
        kept = narrow(kept, rank, ranks)
    clock = time.perf_counter()
    if args.compile_s:
        compile_step(args)
    busy(args.post_s)
    say("post-done", rank)
    log_line(
        args,
        "init engine (profile, create kv cache, warmup model) took "
        f"{time.perf_counter() - clock:.2f} s",
    )
    return kept


def compile_step(args: argparse.Namespace) -> None:
    """Compute for ``--compile-s`` seconds, or read what a start before computed."""
    root = Path(os.environ.get("VLLM_CACHE_ROOT") or Path.home() / ".cache" / "serve_bed")
    artefact = root / "torch_compile_cache" / f"compiled-{args.compile_s:g}.bin"
    clock = time.perf_counter()
    if artefact.exists():
        artefact.read_bytes()
        say("compile-cached")
    else:
        busy(args.compile_s)
        artefact.parent.mkdir(parents=True, exist_ok=True)
        artefact.write_bytes(os.urandom(1 << 20))
        say("compiled")
    log_line(args, f"torch.compile took {time.perf_counter() - clock:.2f} s in total")


def log_line(args: argparse.Namespace, text: str) -> None:
    """One of its phase lines, as vLLM's logger prints it (``--phase-lines``): on standard
    output, but a rank's, whose standard output is its pipe to the server."""
    if args.phase_lines:
        stamp = time.strftime("%m-%d %H:%M:%S")
        line = f"(Worker pid={os.getpid()}) INFO {stamp} [serve_bed.py:1] {text}\n"
        os.write(2 if args.as_rank is not None else 1, line.encode())


# --- the server ------------------------------------------------------------------------------


class Health(http.server.BaseHTTPRequestHandler):
    ready = False

    def do_GET(self) -> None:
        ok = self.path.partition("?")[0] == "/health" and Health.ready
        self.send_response(200 if ok else 503)
        self.end_headers()
        self.wfile.write(b"ok\n" if ok else b"loading\n")

    def log_message(self, *_: object) -> None:
        pass


def listen(port: int = 0, announce: bool = True) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if announce:
        print(f"serve_bed: listening on {server.server_address[1]}", flush=True)
    return server


def run_ranks(args: argparse.Namespace) -> None:
    """Start the ranks as processes of their own, wait for them to load, then serve."""
    env = {**os.environ, T0_VARIABLE: str(T0), "WORLD_SIZE": str(args.ranks)}
    if args.dist == "gloo":
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            env["MASTER_PORT"] = str(probe.getsockname()[1])
    children = []
    for rank in range(args.ranks):
        children.append(
            subprocess.Popen(
                [sys.executable, __file__, *sys.argv[1:], "--as-rank", str(rank)],
                env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        )
    if args.mode == "whole" and args.dist == "pipes":
        for child in children:
            if child.stdout is None or child.stdout.readline() != b"loaded\n":
                fail(children)
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.flush()
    for child in children:
        assert child.stdout is not None
        if child.stdout.readline() != b"done\n":
            fail(children)


def fail(children: list[subprocess.Popen[bytes]]) -> None:
    say("a-rank-failed")
    for child in children:
        child.kill()
        child.wait()
    sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--mode", choices=("whole", "slice"), default="whole")
    parser.add_argument("--import-s", type=float, default=0.5)
    parser.add_argument("--other-mb", type=float, default=4.0)
    parser.add_argument("--post-s", type=float, default=0.5)
    parser.add_argument("--pace-mbps", type=float, default=None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--side-listener", action="store_true")
    parser.add_argument("--slow-rank", type=int, default=None)
    parser.add_argument("--slow-mbps", type=float, default=None)
    parser.add_argument("--die-rank", type=int, default=None)
    parser.add_argument("--die-after-mb", type=float, default=1.0)
    parser.add_argument("--dist", choices=("pipes", "gloo"), default="pipes")
    parser.add_argument("--listen-early", action="store_true")
    parser.add_argument("--lazy", action="store_true")
    parser.add_argument("--never-ready", action="store_true")
    parser.add_argument("--serve-s", type=float, default=600.0)
    parser.add_argument("--phase-lines", action="store_true")
    parser.add_argument("--prefetch", action="store_true")
    parser.add_argument("--idle-s", type=float, default=0.0)
    parser.add_argument("--compile-s", type=float, default=0.0)
    parser.add_argument("--sleep-steps", action="store_true")  # read as SLEEP_STEPS
    parser.add_argument("--as-rank", type=int, default=None)
    parser.add_argument("--as-side-listener", action="store_true")
    args = parser.parse_args()
    if args.as_side_listener:
        time.sleep(0.3)
        helper = listen(announce=False)
        del helper
        time.sleep(args.serve_s)
        return
    if args.as_rank is not None:  # a rank, started by the server
        run_rank(args, args.as_rank, args.ranks, sys.stdout.buffer, sys.stdin.buffer)
        sys.stdout.buffer.write(b"done\n")
        sys.stdout.buffer.flush()
        sys.stdin.read()  # held until the server goes (its end of the pipe closes)
        return
    say("started")
    import numpy  # noqa: F401 - what a server imports before its weights
    import safetensors  # noqa: F401

    busy(args.import_s)
    read_other_files(args.other_mb)
    say("imported")
    server = listen(args.port) if args.listen_early or args.lazy else None
    if args.side_listener:  # a helper process (metrics, say) that listens while weights load
        side = subprocess.Popen([sys.executable, __file__, args.model, "--as-side-listener"])
        del side
    if not args.lazy:
        if args.ranks == 1:
            run_rank(args, 0, 1, None, None)
        else:
            run_ranks(args)
    if args.never_ready:
        time.sleep(args.serve_s)
        return
    time.sleep(args.idle_s)
    Health.ready = True
    if server is None:
        server = listen(args.port)
    say("ready")
    time.sleep(args.serve_s)


if __name__ == "__main__":
    main()
