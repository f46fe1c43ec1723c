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
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import mmap
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from modelmon.core.system.libc import LIBC, MAP_FAILED

BALLOON_DEVICES = "/sys/bus/virtio/drivers/virtio_balloon"
VIRTIO_BALLOON_F_REPORTING = 5  # feature bit: the device accepts free page reports
MADV_HUGEPAGE = 14  # as numpy asks for its large arrays: those take whole free blocks
MADV_POPULATE_WRITE = 23  # Linux 5.14: fault pages in writable without a write per page
PRIME_STEP = 256 << 20  # between steps ``stop`` is checked
PRIMERS = max(1, min(4, os.cpu_count() or 1))  # threads that fault memory in
REPORT_DELAY_S = 2.5  # the kernel's PAGE_REPORTING_DELAY (2 s) after a free, and the pass
PRIME_RESERVE = 512 << 20  # free memory priming leaves alone
# Smaller loads are not primed: their share of host faults, or of a report pass landing in
# them, is too small to be worth the wait before priming (REPORT_DELAY_S).
PRIME_MIN = 256 << 20


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


NOT_PRIMED = Primed()


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
    The caller bounds ``nbytes`` by the free memory."""
    if nbytes <= 0 or not (force or reports_free_pages()):
        return NOT_PRIMED
    settle = settle_left() if settle_s is None else settle_s
    if stop is not None:
        stop.wait(settle)
    else:
        time.sleep(settle)
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
    "again waits for the host to fault it in, so each measured run of "
    f"{PRIME_MIN >> 20} MiB or more starts on primed memory"
)


def primed_text(primed: Primed) -> str:
    """ "primed 5.0 GB of free memory in 0.42 s" for a run's cache line; "" when none was."""
    if primed.bytes <= 0:
        return ""
    return f"primed {primed.bytes / 1e9:.1f} GB of free memory in {primed.seconds:.2f} s"
