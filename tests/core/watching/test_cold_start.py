"""A server's cold start, watched: ready, its phases, its ranks. The server is
tests/serve_bed.py (imports, weights, post-processing, then it listens), run for real. Ready
and the phases are held to what the server did (its own listen, line, answer; its ranks'
reads as the watch saw them) and to its timeline (seconds since its process started) as a
moment the watch cannot see before it happened; how soon after it sees it is the machine's
scheduling, benchmarks/cold_start.py's to measure."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import ReadyCondition, Watch, WatchResult
from modelmon.core.errors import OptionsError
from modelmon.core.output.watch import render_watch
from modelmon.core.system.memory_cgroup import unavailable as cgroup_unavailable
from modelmon.core.watching.cold_findings import headline
from modelmon.core.watching.cold_start import RANK_LATE_S

from ...object_store import BUCKET

BED = Path(__file__).resolve().parents[2] / "serve_bed.py"
needs_cgroup = pytest.mark.skipif(
    cgroup_unavailable() is not None, reason=f"no memory cgroup here: {cgroup_unavailable()}"
)
# Reads are paced, so that a rank's load lasts many of the watch's samples on any disk, and
# on a machine whose cores are busy (a slice is a quarter: paced slower, it lasts as long).
PACE = ("--pace-mbps", "40")
SLICE_PACE = ("--pace-mbps", "15")


# The server's clock counts from its process's start, which the kernel keeps in these ticks.
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def not_before(moment: float | None, event: float) -> bool:
    """Whether the watch's ``moment`` (seconds after it started the command) is no earlier
    than the server's ``event`` (seconds since its process started, on the server's clock).
    The watch reads its clock before it starts the process, and the kernel counts the
    process's start in whole ticks: one instant is at most a tick earlier on the watch's
    clock than on the server's. How much later the watch sees a moment is the machine's
    scheduling (on a loaded machine, a look waits for a core; benchmarks/cold_start.py
    measures it); never earlier than it happened."""
    return moment is not None and moment >= event - TICK_S


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 66 MB model of tensors of 2-6 MB (pacing sleeps between tensors; a rank's slice of
    one is 0.5-1.4 MB, well above the kernel's 64 KiB fault-around window)."""
    from modelmon.core import write_safetensors_model

    return write_safetensors_model(
        tmp_path_factory.mktemp("served"), layers=2, hidden=1024, vocab=4096, seed=21
    )


def events(log: Path) -> dict[str, list[tuple[float, int | None]]]:
    """The server's timeline: event → [(seconds since it started, rank)]."""
    found: dict[str, list[tuple[float, int | None]]] = {}
    for line in log.read_text().splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "serve_bed:" and words[1] != "listening":
            rank = int(words[4]) if len(words) >= 5 and words[3] == "rank" else None
            found.setdefault(words[1], []).append((float(words[2]), rank))
    return found


def serve(
    model: Path, tmp_path: Path, *args: str, **watch: object
) -> tuple[WatchResult, dict[str, list[tuple[float, int | None]]]]:
    log = tmp_path / "bed.log"
    with open(log, "ab") as output:  # appends: the server's processes write to it at once
        result = Watch(
            [sys.executable, str(BED), str(model), *args],
            model=str(model),
            stdout=output.fileno(),
            stderr=output.fileno(),
            quiet_s=watch.pop("quiet_s", None),  # type: ignore[arg-type]
            **watch,  # type: ignore[arg-type]
        ).run()
    assert not leftovers(str(model)), "a process of the server outlived the watch"
    return result, events(log)


def serve_url(
    url: str, tmp_path: Path, *args: str
) -> tuple[WatchResult, dict[str, list[tuple[float, int | None]]]]:
    log = tmp_path / "bed.log"
    with open(log, "ab") as output:  # appends: the server's processes write to it at once
        result = Watch(
            [sys.executable, str(BED), url, *args],
            model=url,
            stdout=output.fileno(),
            stderr=output.fileno(),
        ).run()
    assert not leftovers(url), "a process of the server outlived the watch"
    return result, events(log)


def leftovers(model: str) -> list[int]:
    """Processes of the test bed serving ``model`` still running (another test's bed on this
    machine serves a model of its own)."""
    return running_with(str(BED), model)


def running_with(*words: str) -> list[int]:
    """Processes still running (not zombies) whose arguments hold every one of ``words``."""
    wanted = [word.encode() for word in words]
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as stat:
                state = stat.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if all(word in argv for word in wanted) and state != b"Z":
            found.append(int(name))
    return found


def first(found: dict[str, list[tuple[float, int | None]]], event: str) -> float:
    return min(t for t, _ in found[event])


def last(found: dict[str, list[tuple[float, int | None]]], event: str) -> float:
    return max(t for t, _ in found[event])


def announced_port(log: Path) -> int:
    """The port the server said it listens on (``serve_bed: listening on PORT``)."""
    lead = "serve_bed: listening on "
    (port,) = {int(line[len(lead) :]) for line in log.read_text().splitlines() if lead in line}
    return port


def test_one_rank_is_ready_when_it_listens_and_each_phase_is_the_servers_own(
    model: Path, tmp_path: Path
) -> None:
    """Ready is the server's own listen, the phases one timeline from its start to ready, and
    each phase holds the server's own work. How close the watch's moments come to the
    server's clock is benchmarks/cold_start.py's to measure: on a loaded machine the server
    may wait for a core between saying it reads and reading, and the watch sees an arrival
    only within its scans."""
    result, _ = serve(model, tmp_path, "--import-s", "0.8", "--post-s", "0.8", *PACE)
    cold = result.cold_start
    assert cold is not None and result.status == "stopped" and result.ended_by == "ready"
    port = announced_port(tmp_path / "bed.log")
    assert cold.ready_by == "listen"
    assert cold.ready_detail == f"pid {result.pid} listened on :{port}"
    before, weights, after = cold.phases
    assert [p.name for p in cold.phases] == ["before", "weights", "after"]
    assert before.start_s == 0.0  # the command's start, its first model byte, its last, ready
    assert before.end_s == weights.start_s < weights.end_s == after.start_s
    assert after.start_s < after.end_s == cold.ready_s
    assert weights.model_bytes == result.model_bytes
    assert before.model_bytes == after.model_bytes == 0
    # Before: the interpreter, imports and the standard library's sources read (4 MB).
    assert before.other_read_bytes >= 4_000_000 and before.cpu_s > 0
    assert after.cpu_s > 0  # the post-processing computed
    (rank,) = cold.ranks
    assert rank.model_bytes >= 0.75 * result.model_bytes
    assert rank.held_bytes >= 0.9 * result.model_bytes  # it kept a copy of every tensor
    line = headline(cold)
    assert line.startswith(f"ready in {cold.ready_s:.1f} s") and "reading the weights" in line
    assert result.to_dict()["cold_start"]["phases"][1]["name"] == "weights"


def test_ranks_that_each_read_the_whole_model_and_keep_a_copy(model: Path, tmp_path: Path) -> None:
    result, _ = serve(model, tmp_path, "--ranks", "4", "--mode", "whole", "--post-s", "0.3", *PACE)
    cold = result.cold_start
    assert cold is not None and cold.ready_s is not None and len(cold.ranks) == 4
    assert [r.rank for r in cold.ranks] == [0, 1, 2, 3]
    assert {r.rank_from for r in cold.ranks} == {"RANK"}  # torchrun's variable
    size = result.model_bytes
    for rank in cold.ranks:
        assert rank.model_bytes >= 0.75 * size
        assert 0.9 * size <= rank.held_bytes <= size + (96 << 20)
    codes = {f.code for f in result.findings}
    assert {"every-rank-reads-all", "copies-per-rank"} <= codes
    assert "double-copy" not in codes  # judged rank by rank


def test_ranks_that_read_their_slices_read_a_quarter_each(model: Path, tmp_path: Path) -> None:
    result, _ = serve(
        model, tmp_path, "--ranks", "4", "--mode", "slice", "--post-s", "0.3", *SLICE_PACE
    )
    cold = result.cold_start
    assert cold is not None and len(cold.ranks) == 4
    for rank in cold.ranks:
        # A quarter, and the pages around it its faults mapped (up to 64 KiB a side).
        assert 0.15 * result.model_bytes <= rank.model_bytes <= 0.5 * result.model_bytes
    codes = {f.code for f in result.findings}
    assert not {"every-rank-reads-all", "copies-per-rank"} & codes


def test_a_slowed_rank_is_named_the_slowest(model: Path, tmp_path: Path) -> None:
    result, _ = serve(
        model,
        tmp_path,
        *("--ranks", "4", "--mode", "slice", "--post-s", "0.2"),
        *("--slow-rank", "2", "--slow-mbps", "5", *SLICE_PACE),
    )
    cold = result.cold_start
    assert cold is not None and cold.ready_s is not None
    (slowest,) = [f for f in result.findings if f.code == "slowest-rank"]
    assert slowest.evidence["rank"] == 2
    assert "Rank 2" in slowest.text
    weights = cold.phase("weights")
    assert weights is not None
    # The weights end when the slowest rank has read them, by each rank's reads as the watch
    # saw them: after every other rank's last byte, at the slow one's (the same byte may be
    # seen a tick apart: RANK_LATE_S), or at ready if the watch saw that first.
    ends = {rank.rank: rank.end_s for rank in cold.ranks}
    assert None not in ends.values(), cold.ranks
    assert weights.end_s > max(end for rank, end in ends.items() if rank != 2), ends
    assert weights.end_s >= min(ends[2] - RANK_LATE_S, cold.ready_s), (weights, ends)


def test_a_ready_line_of_the_output_is_ready_and_passes_through(
    model: Path, tmp_path: Path
) -> None:
    result, found = serve(
        model,
        tmp_path,
        *PACE,
        ready=ReadyCondition(line=r"^serve_bed: ready \d"),
    )
    cold = result.cold_start
    assert cold is not None and cold.ready_by == "line"
    ready = first(found, "ready")  # ready is when the watch read the server's own line
    assert cold.ready_detail == f'its output said "serve_bed: ready {ready:.3f}"'
    assert not_before(cold.ready_s, ready), (cold.ready_s, ready)
    assert "started" in found and "ready" in found  # its output reached where it was going


def test_a_ready_url_answering_2xx_is_ready(model: Path, tmp_path: Path) -> None:
    port = free_port()
    result, found = serve(
        model,
        tmp_path,
        *("--listen-early", "--port", str(port), *PACE),
        ready=ReadyCondition(url=f"http://127.0.0.1:{port}/health?token=s3cr3t"),
    )
    cold = result.cold_start
    assert cold is not None and cold.ready_by == "url" and not cold.lazy
    assert (cold.ready_detail or "").endswith(" answered 200"), cold.ready_detail
    # It answers 503 until its weights are read and processed: 200 is no earlier.
    done = last(found, "post-done")
    assert not_before(cold.ready_s, done), (cold.ready_s, done)
    assert "s3cr3t" not in str(result.to_dict())  # a token in the URL is not written


def test_a_server_that_binds_before_loading_is_ready_when_it_goes_quiet_after(
    model: Path, tmp_path: Path
) -> None:
    """Ready at the end of the last of the watch's samples in which the server computed
    (``observer``: a tenth of a core or more): after its weights, where its post-processing
    ended, as finely as the samples the watch could take on a busy machine."""
    result, found = serve(model, tmp_path, "--listen-early", "--post-s", "0.5", *PACE)
    cold = result.cold_start
    assert cold is not None and cold.ready_by == "listen" and not cold.lazy
    assert [e[3] for e in cold.early_listens] == ["before its weights were read"]
    assert "--ready-url" in (cold.ready_detail or "")
    # The end of one of the watch's samples, after the server's last model byte.
    assert result.samples is not None and result.samples.spans is not None
    ends = result.samples.spans[1]
    assert cold.ready_s is not None and min(abs(ends - cold.ready_s)) < 1e-6, cold.ready_s
    ended = last(found, "last-byte")
    assert not_before(cold.ready_s, ended), (cold.ready_s, ended)


def test_a_lazy_server_is_said_so_never_a_load_of_no_seconds(model: Path, tmp_path: Path) -> None:
    result, _ = serve(model, tmp_path, "--lazy")
    cold = result.cold_start
    assert cold is not None and cold.lazy and cold.ready_s is not None
    assert [p.name for p in cold.phases] == ["before"]
    assert "lazy server" in headline(cold)
    assert result.seconds is None  # no load was seen, so none is timed


def test_a_port_of_a_helper_that_read_no_weights_is_not_ready(model: Path, tmp_path: Path) -> None:
    result, _ = serve(model, tmp_path, "--side-listener", "--post-s", "0.5", *PACE)
    cold = result.cold_start
    assert cold is not None and cold.ready_by == "listen"
    port = announced_port(tmp_path / "bed.log")  # the server's own listen, not the helper's
    assert cold.ready_detail == f"pid {result.pid} listened on :{port}"
    assert any("neither the command nor" in why for *_, why in cold.early_listens)


def test_a_server_never_ready_is_stopped_at_its_timeout(model: Path, tmp_path: Path) -> None:
    result, _ = serve(
        model,
        tmp_path,
        "--never-ready",
        ready=ReadyCondition(port=free_port()),
        ready_timeout_s=2.5,
    )
    cold = result.cold_start
    assert result.ended_by == "ready-timeout" and cold is not None and cold.ready_s is None
    assert headline(cold).startswith("never seen ready")


def test_a_rank_that_dies_mid_load_ends_the_watch_cleanly(model: Path, tmp_path: Path) -> None:
    result, _ = serve(
        model, tmp_path, "--ranks", "2", "--die-rank", "1", "--die-after-mb", "8", *PACE
    )
    assert result.status == "exited" and result.exit_code == 1
    cold = result.cold_start
    assert cold is not None and cold.ready_s is None


@pytest.mark.parametrize("mode", ["whole", "slice"])
def test_ranks_streaming_from_a_bucket_are_counted_by_their_connections(
    rclone_s3: SimpleNamespace, tmp_path: Path, mode: str
) -> None:
    url = f"s3://{BUCKET}/served/model.safetensors"
    pace = "10" if mode == "whole" else "3"
    result, _ = serve_url(url, tmp_path, "--ranks", "4", "--mode", mode, "--pace-mbps", pace)
    cold = result.cold_start
    assert cold is not None and cold.ready_s is not None and len(cold.ranks) == 4
    size = result.model_bytes
    codes = {f.code for f in result.findings}
    if mode == "whole":  # every rank's GETs fetched every byte: 4 × the model's
        for rank in cold.ranks:
            assert size <= rank.model_bytes <= size * 1.05
        (found,) = [f for f in result.findings if f.code == "every-rank-reads-all"]
        assert "4 × the model's GETs" in found.text
        assert result.connections is not None and result.connections.received_bytes >= 4 * size
    else:
        for rank in cold.ranks:
            assert 0.2 * size <= rank.model_bytes <= 0.35 * size
        assert "every-rank-reads-all" not in codes


@needs_cgroup
def test_under_a_memory_limit_the_cold_start_says_its_headroom_at_ready(
    model: Path, tmp_path: Path
) -> None:
    result, _ = serve(model, tmp_path, *PACE, memory_limit=1 << 30)
    cold = result.cold_start
    assert cold is not None and cold.ready_s is not None and cold.memory is not None
    moment = cold.memory
    assert moment.reached_s is None and moment.limit_bytes == 1 << 30
    assert moment.charged_at_ready is not None and 0 < moment.charged_at_ready < 1 << 30
    assert moment.headroom_bytes == (1 << 30) - moment.charged_at_ready
    assert "headroom" in render_watch(result)


@needs_cgroup
def test_under_a_memory_limit_the_cold_start_says_where_it_was_reached(
    model: Path, tmp_path: Path
) -> None:
    # Two ranks each holding the whole 68 MB model, beside their interpreters: 160 MiB is
    # reached while they read it.
    result, _ = serve(
        model, tmp_path, "--ranks", "2", "--mode", "whole", *PACE, memory_limit=160 << 20
    )
    cold = result.cold_start
    assert cold is not None and cold.memory is not None
    moment = cold.memory
    assert moment.reached_s is not None and moment.reached_phase == "weights"
    assert moment.reached_rank in {r.rank for r in cold.ranks}
    assert f"reached at {moment.reached_s:.1f} s reading the weights" in render_watch(result)


def test_ready_conditions_that_cannot_be_watched_for_are_refused() -> None:
    for condition, words in (
        (ReadyCondition(port=70000), "TCP port"),
        (ReadyCondition(line="(unclosed"), "regular expression"),
        (ReadyCondition(url="ftp://host/x"), "http"),
        (ReadyCondition(url="http://:80/x"), "host"),
        (ReadyCondition(url="http://[::1/?token=SECRET"), "not a URL"),
        (ReadyCondition(url="http://[v1.x]/?token=SECRET"), r"not a URL \(its host\)"),
    ):
        with pytest.raises(OptionsError, match=words) as refused:
            Watch(["true"], ready=condition)
        assert "SECRET" not in str(refused.value)
    with pytest.raises(OptionsError, match="command modelmon starts"):
        Watch(pid=os.getpid() + 10**6, ready=ReadyCondition(port=80))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_ready_url_that_never_answers_ends_in_one_line(model: Path, tmp_path: Path) -> None:
    """The CLI: exit 9, one line naming what the URL last did, nothing left running."""
    port = free_port()  # nothing listens on it
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "modelmon",
            "watch",
            "--ready-url",
            f"http://127.0.0.1:{port}/health?key=s3cr3t",
            "--ready-timeout",
            "3",
            "--",
            sys.executable,
            str(BED),
            str(model),
            "--import-s",
            "0.2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 9, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "not ready within" in last and "the connection was refused" in last
    assert "s3cr3t" not in done.stdout + done.stderr
    assert not leftovers(str(model))


def test_gloo_ranks_whose_store_listens_before_the_weights_are_ready_later(
    model: Path, tmp_path: Path
) -> None:
    pytest.importorskip("torch.distributed")
    result, _ = serve(model, tmp_path, "--ranks", "2", "--mode", "whole", "--dist", "gloo", *PACE)
    cold = result.cold_start
    assert cold is not None and cold.ready_by == "listen" and len(cold.ranks) == 2
    # The store on MASTER_PORT and gloo's own sockets listen before any weight is read.
    assert cold.early_listens and all(
        why == "before its weights were read" for *_, why in cold.early_listens
    )
    port = announced_port(tmp_path / "bed.log")  # ready is the server's own listen
    assert cold.ready_detail == f"pid {result.pid} listened on :{port}"


# A server that daemonizes (double fork, a new session, the first two processes gone at
# once), then reads its weights and listens: argv[1] the model, argv[2] a marker of the test,
# argv[3] how long it waits before it reads.
DAEMON = """
import os, socket, sys, time
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
time.sleep(float(sys.argv[3]))
with open(sys.argv[1], "rb") as weights:
    while weights.read(1 << 20):
        pass
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
time.sleep(60)
"""


@pytest.mark.parametrize("pause", ["0", "1"])
def test_a_server_that_daemonizes_is_followed_to_its_ready(
    model: Path, tmp_path: Path, pause: str
) -> None:
    """Its middle process ends before any look sees it: the server is handed to modelmon as
    an orphan with no new pid and no member's end, and is still found, seen ready when it
    listens, and stopped. Found before it reads, it may read all and listen between two
    looks at its descriptors: its listen is still the server's, after its weights."""
    marker = str(tmp_path / "daemon")
    result = Watch(
        [sys.executable, "-c", DAEMON, str(model), marker, pause],
        model=str(model),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).run()
    cold = result.cold_start
    assert cold is not None and cold.ready_s is not None and cold.ready_by == "listen", cold
    assert "before its weights" not in (cold.ready_detail or "")
    assert result.bytes_read >= 0.9 * model.stat().st_size
    assert result.first_byte_s is not None and cold.ready_s >= result.first_byte_s
    assert not running_with(marker), "the daemon outlived the watch"


# A launcher whose two ranks each read the whole model (argv[1]) in three stretches: a burst
# before a look can see its descriptor, a paced middle the looks see, and a burst after the
# last of them; argv[2] a marker of the test.
BURSTS = """
import os, subprocess, sys, time
if sys.argv[-1] == "rank":
    with open(sys.argv[1], "rb", buffering=0) as weights:
        weights.read(20 << 20)
        for _ in range(24):
            weights.read(1 << 20)
            time.sleep(0.05)
        while weights.read(8 << 20):
            pass
    time.sleep(0.5)
    sys.exit(0)
children = [
    subprocess.Popen(
        [sys.executable, sys.argv[0], *sys.argv[1:], "rank"],
        env={**os.environ, "RANK": str(rank), "WORLD_SIZE": "2"},
    )
    for rank in range(2)
]
sys.exit(max(child.wait() for child in children))
"""


def test_a_rank_is_credited_what_it_read_before_and_after_the_looks_saw_it(
    model: Path, tmp_path: Path
) -> None:
    """A rank's bytes are what it read of the model, though its reading began before the
    first look that saw its descriptor and ended after the last: the offsets a look sees
    bound what it read before, its read calls count the rest."""
    launcher = tmp_path / "launcher.py"
    launcher.write_text(BURSTS)
    result = Watch(
        [sys.executable, str(launcher), str(model), str(tmp_path)],
        model=str(model),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).run()
    cold = result.cold_start
    assert cold is not None and len(cold.ranks) == 2, cold
    size = model.stat().st_size
    for rank in cold.ranks:
        assert rank.model_bytes >= 0.99 * size, (rank, size)
    assert not running_with(str(launcher))
