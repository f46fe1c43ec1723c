"""Free memory that a virtual machine's host takes back, and priming it before a measured load.

With virtio-balloon free page reporting the guest tells the hypervisor which free pages it
holds (in blocks, a couple of seconds after they were freed) and the host discards them.
The next use of such a page stops the vCPU while the host faults in and zeroes a page: on
this project's firecracker VMs, touching 2.5 GB took 0.23 s when it had been freed 0.5 s
earlier and 2.4-4.4 s when it had been freed 5-10 s earlier. A load fills its page cache and
its arrays from free memory, so each run would be timed together with an amount of host
work set by how long ago the previous run freed its memory: back-to-back loads of the same
configuration ran 800 to 2,500 MB/s. ``prime`` touches the memory the load is about to take
and frees it again, so every measured run starts on memory the host backs; the seconds it
took say what a load pays where nothing primed it.

The guest reports in passes that start about 2 s after a large free. Priming right after the
previous run's memory and page cache were freed left that pass to land inside every other
load (768-832 MiB reported during the slow ones, none during the fast ones: 2,100 against
2,500 MB/s, alternating). So ``prime`` first lets that pass happen, then touches: six
loads in a row then ran 2,242-2,478 MB/s with nothing reported while they ran. The wait
counts from the last large free this process noted (``note_free``): a run drops a cold
model's pages before its workers or peer start, so the pass runs while they import.

Priming holds what it touches until it unmaps it, and on the machines this tool is for
(an inference node beside a server holding its model, a laptop with a browser open) that
memory is not idle. So priming is bounded (``plan_priming``): it touches at most the memory
the load itself will hold that no one can take back, its arrays (nothing for a discard load
or one whose tensors are views of a mapping), so that it never raises a run's peak above the
load's own. The page cache a cold load fills is not primed: held as anonymous memory while
priming runs, it is memory the kernel cannot reclaim for other programs (a discard load of
4.4 GB holds 80 MiB of its own; priming its page cache held 4.1 GiB, for 11 s on this
project's busy VMs). Priming touches at most ``PRIME_SHARE`` of the memory available and
never below ``PRIME_RESERVE`` of free memory (nor of its memory cgroup's room), and not at
all while tasks already stall on memory (``memory_pressure``). ``prime_mode`` turns it off,
or on where no host is seen. What it touches is left out of the run's own peak
(``proc_status.left_out_of_peak``): the result says what was primed on its own line.

A storage bound's plain reads are the exception (``prime_page_cache``, asked for by the
bound alone): a bound stands for loads that keep their bytes, whose page cache lands partly
on their primed arrays' memory, so it primes the page cache it fills. A plain cold read of
2.5 GB on this project's VMs ran 1,640 MB/s (median of 4) with its page cache unprimed and
3,620 primed: measured unprimed, a bound was beaten 1.5× by the loads it bounded. Loads pay
the host's faults for their page cache, as any program reading the file on that VM would.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import mmap
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from modelmon.core.errors import OptionsError
from modelmon.core.options import PRIME_MODES, PrimeMode
from modelmon.core.system.libc import LIBC, MAP_FAILED
from modelmon.core.system.proc_status import left_out_of_peak
from modelmon.core.units import gib_text

BALLOON_DEVICES = "/sys/bus/virtio/drivers/virtio_balloon"
VIRTIO_BALLOON_F_REPORTING = 5  # feature bit: the device accepts free page reports
MADV_HUGEPAGE = 14  # as numpy asks for its large arrays: those take whole free blocks
MADV_POPULATE_WRITE = 23  # Linux 5.14: fault pages in writable without a write per page
PRIME_STEP = 256 << 20  # between steps ``stop`` is checked
PRIMERS = max(1, min(4, os.cpu_count() or 1))  # threads that fault memory in
REPORT_DELAY_S = 2.5  # the kernel's PAGE_REPORTING_DELAY (2 s) after a free, and the pass
PRIME_RESERVE = 512 << 20  # free memory (and cgroup room) priming leaves alone
# Smaller loads are not primed: their share of host faults, or of a report pass landing in
# them, is too small to be worth the wait before priming (REPORT_DELAY_S).
PRIME_MIN = 256 << 20
# At most this share of the memory available: what is left covers what other programs take
# while priming runs (seconds), without reclaim.
PRIME_SHARE = 0.5
# Percent of the last 10 s in which some task stalled on memory (PSI "some avg10"): at or
# above it, something is reclaiming already and priming would only add to it.
PRESSURE_LIMIT = 1.0
PRESSURE = Path("/proc/pressure/memory")

# The process's priming mode (``options.PRIME_MODES``): "on" also primes where no host that
# takes memory back is seen (one this process cannot see, a test). The CLI sets it from
# --prime-memory, the app from its preference.
_mode: PrimeMode = "auto"


def set_prime_mode(mode: str) -> None:
    """Set this process's priming mode (one of ``PRIME_MODES``)."""
    global _mode
    if mode not in PRIME_MODES:
        raise OptionsError(f"prime-memory must be one of {', '.join(PRIME_MODES)}, not {mode!r}")
    _mode = mode


def prime_mode() -> PrimeMode:
    return _mode


def priming_applies(mode: PrimeMode | None = None) -> bool:
    """Whether loads are primed at all under ``mode`` (default: the process's) here."""
    mode = mode or _mode
    return mode == "on" or (mode == "auto" and reports_free_pages())


# When this process last freed (or saw freed) a large amount of memory: evicting a model's
# pages, its workers or a peer exiting, priming's own unmap. None until the first: the wait
# before priming then assumes a free just happened.
_last_free: float | None = None
FREE_WORTH_NOTING = 64 << 20  # a pass reporting less takes a few milliseconds


def note_free() -> None:
    """Say that a large amount of memory was freed just now (a report pass follows)."""
    global _last_free
    _last_free = time.monotonic()


def settle_left() -> float:
    """Seconds until the report pass started by the last noted free has surely run."""
    if _last_free is None:
        return REPORT_DELAY_S
    return max(0.0, _last_free + REPORT_DELAY_S - time.monotonic())


@dataclass(frozen=True, slots=True)
class Primed:
    """Free memory touched (and given back) just before a load; zero where none was needed."""

    bytes: int = 0
    seconds: float = 0.0
    wanted: int = 0  # the memory priming covers (the load's arrays): the most it touches
    # Why this much, in a few words ("the load's arrays", what capped it, why none); "" where
    # priming does not apply (the host keeps freed memory, and the mode is auto).
    why: str = ""


NOT_PRIMED = Primed()


def memory_pressure(path: Path = PRESSURE) -> float | None:
    """PSI's "some avg10" for memory: the percent of the last 10 s in which some task waited
    on memory (reclaim, swap-in, thrashing); None where the kernel has no PSI."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("some "):
                fields = dict(part.split("=", 1) for part in line.split()[1:])
                return float(fields["avg10"])
    except (OSError, ValueError, KeyError):
        pass
    return None


def _share() -> str:
    return "half" if PRIME_SHARE == 0.5 else f"{PRIME_SHARE:.0%}"


def plan_priming(
    arrays: int,
    *,
    page_cache: int = 0,
    prime_page_cache: bool = False,
    free: int,
    available: int,
    cgroup_free: int | None = None,
    pressure: float | None = None,
) -> Primed:
    """How much to prime for a load that will hold ``arrays`` bytes of anonymous memory and
    fill ``page_cache`` bytes of page cache, and why: its arrays (and the page cache, only
    where ``prime_page_cache``: a storage bound's plain reads), capped at ``PRIME_SHARE`` of
    ``available`` (the memory the load may use: MemAvailable, its cgroup's, its address
    space's) and at ``free`` (MemFree) and the cgroup's ``cgroup_free`` (limit minus usage)
    less ``PRIME_RESERVE``, so that nothing is reclaimed for it; none under ``PRIME_MIN`` or
    while ``pressure`` (``memory_pressure``) says tasks stall on memory. The seconds are left
    at zero: nothing is touched here."""
    if arrays + page_cache <= 0:
        return Primed(why="nothing to prime: the load takes no fresh memory")
    primed_cache = page_cache if prime_page_cache else 0
    wanted = arrays + primed_cache
    if wanted <= 0:
        return Primed(
            why="not primed: the load keeps no arrays (its page cache is not primed, so that "
            "priming never holds more than the load)"
        )
    if wanted < PRIME_MIN:
        return Primed(wanted=wanted, why=f"not primed: under {PRIME_MIN >> 20} MiB")
    if pressure is not None and pressure >= PRESSURE_LIMIT:
        return Primed(
            wanted=wanted,
            why=f"not primed: tasks stalled on memory {pressure:.1f}% of the last 10 s",
        )
    rooms = [
        (int(available * PRIME_SHARE), f"{_share()} of the {gib_text(available)} available"),
        (free - PRIME_RESERVE, f"all but {PRIME_RESERVE >> 20} MiB of the {gib_text(free)} free"),
    ]
    if cgroup_free is not None:
        rooms.append(
            (
                cgroup_free - PRIME_RESERVE,
                f"all but {PRIME_RESERVE >> 20} MiB of the {gib_text(cgroup_free)} its memory "
                "cgroup has left",
            )
        )
    room, limit = min(rooms)
    if wanted <= room:
        return Primed(bytes=wanted, wanted=wanted, why=_what_is_primed(arrays, primed_cache))
    if room < PRIME_MIN:
        return Primed(wanted=wanted, why=f"not primed: {limit} is under {PRIME_MIN >> 20} MiB")
    return Primed(bytes=room, wanted=wanted, why=f"capped at {limit}")


def _what_is_primed(arrays: int, page_cache: int) -> str:
    if arrays and page_cache:
        return "the load's arrays and page cache"
    return "the load's arrays" if arrays else "the page cache the load fills"


def reports_free_pages(devices: str | Path = BALLOON_DEVICES) -> bool:
    """True when a virtio balloon that takes free page reports is bound (sysfs ``features``
    is one character per feature bit, "0" or "1")."""
    return _reports_free_pages(str(devices))


@functools.cache
def _reports_free_pages(devices: str) -> bool:
    for device in Path(devices).glob("virtio*"):
        try:
            features = (device / "features").read_text().strip()
        except OSError:
            continue
        if (
            len(features) > VIRTIO_BALLOON_F_REPORTING
            and features[VIRTIO_BALLOON_F_REPORTING] == "1"
        ):
            return True
    return False


def settle(stop: threading.Event | None = None, settle_s: float | None = None) -> None:
    """Wait ``settle_s`` (default: what is left of ``REPORT_DELAY_S`` since the last noted
    free) for the report pass that recent frees started, so that it does not land inside the
    load about to start: before priming, and before a load that primes nothing (a discard
    load, one declined), which takes the same kind of memory for its page cache."""
    wait = settle_left() if settle_s is None else settle_s
    if stop is not None:
        stop.wait(wait)
    else:
        time.sleep(wait)


def prime(
    nbytes: int,
    stop: threading.Event | None = None,
    *,
    force: bool = False,
    settle_s: float | None = None,
) -> Primed:
    """Wait ``settle_s`` (default: what is left of ``REPORT_DELAY_S`` since the last noted
    free) for the report pass that recent frees started, then fault ``nbytes`` of anonymous
    memory in and unmap it, when free pages are reported to a host (or ``force``): the load
    that starts right after takes those pages back from the free lists before the next pass.
    The caller bounds ``nbytes`` by the free memory. What it touches is left out of the
    run's own peak (``proc_status.left_out_of_peak``)."""
    if nbytes <= 0 or not (force or reports_free_pages()):
        return NOT_PRIMED
    settle(stop, settle_s)
    with left_out_of_peak():
        return _touch_and_free(nbytes, stop)


def _touch_and_free(nbytes: int, stop: threading.Event | None) -> Primed:
    started = time.perf_counter()
    protection = mmap.PROT_READ | mmap.PROT_WRITE
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    address = LIBC.mmap(None, nbytes, protection, flags, -1, 0)
    if address is None or address == MAP_FAILED:
        return NOT_PRIMED
    steps = itertools.count()
    touched = [0] * PRIMERS

    def touch(primer: int) -> None:
        while not (stop is not None and stop.is_set()):
            offset = next(steps) * PRIME_STEP  # itertools.count is atomic under the GIL
            if offset >= nbytes:
                return
            step = min(PRIME_STEP, nbytes - offset)
            if LIBC.madvise(address + offset, step, MADV_POPULATE_WRITE) != 0:
                ctypes.memset(address + offset, 0, step)  # a kernel before 5.14
            touched[primer] += step

    try:
        # Reports cover only large free blocks, and huge pages are carved from exactly those
        # (4 KiB faults may be served from small free blocks the host never took back).
        LIBC.madvise(address, nbytes, MADV_HUGEPAGE)
        # Each host fault stops only the vCPU that took it: one thread per CPU primed 5 GB
        # in 1.2-4.9 s where one thread took 4.9-10.9 s.
        primers = [
            threading.Thread(target=touch, args=(i,), name=f"modelmon-prime-{i}", daemon=True)
            for i in range(PRIMERS)
        ]
        for primer in primers:
            primer.start()
        for primer in primers:
            primer.join()
    finally:
        LIBC.munmap(address, nbytes)
        note_free()
    done = sum(touched)
    return Primed(done, time.perf_counter() - started)


# What free page reporting has given the host so far, in KiB. Not an upstream parameter: the
# kernels of this project's VMs export it. Read at go and at the end of a load, it says
# whether a report pass landed inside the timing (1 GB reported during an mmap-view load:
# 1,721 MB/s, against 2,257 with none), so that a perturbed run says so.
REPORTED_KIB = Path("/sys/module/page_reporting/parameters/reported_kib")


def reported_bytes(counter: Path | None = None) -> int | None:
    """Bytes of free memory reported to the host since boot; None where nothing counts them."""
    try:
        return int((counter or REPORTED_KIB).read_text()) * 1024
    except (OSError, ValueError):
        return None


def reported_since(before: int | None, counter: Path | None = None) -> int | None:
    """Bytes reported since ``before`` (a ``reported_bytes`` reading taken at go); None
    where the counter was not read."""
    after = reported_bytes(counter)
    return None if before is None or after is None else max(0, after - before)


def reported_notes(nbytes: int | None) -> tuple[str, ...]:
    """The note a load carries when a report pass of ``FREE_WORTH_NOTING`` or more landed
    inside its timing; none otherwise."""
    if nbytes is None or nbytes < FREE_WORTH_NOTING:
        return ()
    return (
        f"host: {nbytes >> 20} MiB of free memory went back to the VM's host while this load "
        "ran (free page reporting): host work inside the timing, it may read slower than usual",
    )


# What the facts say where the host takes free pages back.
RETURNS_FREE_MEMORY = (
    "freed memory goes back to the VM's host (free page reporting): a load that takes it "
    "again waits for the host to fault it in, so each measured run that keeps "
    f"{PRIME_MIN >> 20} MiB or more of arrays starts with that memory primed (at most half "
    "the memory available; not the page cache it fills, so that priming never holds more "
    "than the load)"
)


def primed_text(primed: Primed) -> str:
    """ "primed 5.0 GB of free memory in 0.42 s (the load's arrays)" for a run's cache line,
    or why none was ("not primed: ..."); "" where priming does not apply."""
    if primed.bytes <= 0:
        return primed.why
    text = f"primed {primed.bytes / 1e9:.1f} GB of free memory in {primed.seconds:.2f} s"
    why = primed.why
    if primed.bytes < primed.wanted:
        why += f"{'; ' if why else ''}the load takes {primed.wanted / 1e9:.1f} GB"
    return text + (f" ({why})" if why else "")


def priming_plan_text(plan: Primed) -> str:
    """What the progress strip says while priming runs: "priming 2.5 GB of free memory
    (the load's arrays)"; "" when nothing is primed."""
    if plan.bytes <= 0:
        return ""
    return f"priming {plan.bytes / 1e9:.1f} GB of free memory ({plan.why})"


def with_seconds(plan: Primed, done: Primed) -> Primed:
    """The plan with what ``prime`` really touched, and how long it took."""
    if done.bytes <= 0:  # stopped before the first step, or the mapping was refused
        return replace(plan, bytes=0, seconds=done.seconds, why="not primed: stopped or refused")
    return replace(plan, bytes=done.bytes, seconds=done.seconds)
