"""Loaders that are not modelmon, to watch: each a small Python program that loads a model the
way a real loader does and prints its own timing as one JSON line.

- ``forked-mapping``: a parent opens the file, forks readers that inherit the descriptor; each
  maps the file through it and touches its share of the pages (diffusers' processes on one
  descriptor, the first story of the brief);
- ``lazy-slices``: ``safe_open`` then ``get_slice(name)[:1]`` of a few tensors: a "load" that
  maps the file and reads almost nothing (the second story);
- ``load-file``: ``safetensors.numpy.load_file``: maps and copies every tensor;
- ``read-whole``: ``read()`` front to back in 8 MiB pieces, like ``--no-mmap`` loaders.

``go``: the program waits for this file before it loads (so a watch can attach first);
``hold``: after loading it creates ``hold/loaded`` and waits for ``hold/release`` with what it
holds still open and mapped (so a test can let the watch look at it, then let it go). Both
waits end after WAIT_S whatever happens.
"""

from __future__ import annotations

import sys
from pathlib import Path

KINDS = ("forked-mapping", "lazy-slices", "load-file", "read-whole")
WHAT = {  # each in a few words, for the bench's table
    "forked-mapping": "4 forked readers map one inherited descriptor",
    "lazy-slices": "`safe_open` + `get_slice(name)[:1]` of 4 tensors",
    "load-file": "`safetensors.numpy.load_file`",
    "read-whole": "`read()` front to back, 8 MiB at a time",
}
WAIT_S = 60.0

SOURCE = r"""
import json, mmap, os, sys, time

kind, path, readers, go, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
WAIT_S = float(sys.argv[6])

def wait_for(name):
    deadline = time.monotonic() + WAIT_S
    while name and not os.path.exists(name) and time.monotonic() < deadline:
        time.sleep(0.005)

def held():
    if hold:
        open(os.path.join(hold, "loaded." + str(os.getpid())), "w").close()
        wait_for(os.path.join(hold, "release"))

wait_for(go)
size = os.path.getsize(path)
started_ns = time.perf_counter_ns()  # CLOCK_MONOTONIC: the watch's clock too
started = time.perf_counter()
pids = [os.getpid()]
touched = size
if kind == "forked-mapping":
    import numpy as np
    fd = os.open(path, os.O_RDONLY)
    children = []
    for index in range(readers):
        pid = os.fork()
        if pid == 0:
            view = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            pages = np.frombuffer(view, dtype=np.uint8)
            first, end = index * size // readers, (index + 1) * size // readers
            int(pages[first:end:4096].sum())  # every page of its share, through the mapping
            held()
            del pages
            view.close()
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    pids += children
    os.close(fd)
elif kind == "lazy-slices":
    from safetensors import safe_open
    with safe_open(path, framework="np") as model:
        names = sorted(model.keys())[:4]
        touched = 0
        for name in names:
            part = model.get_slice(name)[:1]
            touched += part.nbytes
        held()
elif kind == "load-file":
    from safetensors.numpy import load_file
    tensors = load_file(path)
    touched = sum(t.nbytes for t in tensors.values())
    held()
elif kind == "read-whole":
    with open(path, "rb", buffering=0) as file:
        buffer = bytearray(8 << 20)
        while file.readinto(buffer):
            pass
        held()
else:
    sys.exit("unknown kind " + kind)
seconds = time.perf_counter() - started
ended_ns = time.perf_counter_ns()
print(json.dumps({"kind": kind, "seconds": seconds, "bytes": touched, "size": size, "pids": pids,
                  "start_ns": started_ns, "end_ns": ended_ns}))
"""


def program(
    kind: str,
    model: str | Path,
    *,
    readers: int = 4,
    go: str | Path | None = None,
    hold: str | Path | None = None,
) -> list[str]:
    """The command line of one watched program."""
    if kind not in KINDS:
        raise ValueError(f"unknown program {kind!r}: {', '.join(KINDS)}")
    return [
        sys.executable,
        "-c",
        SOURCE,
        kind,
        str(model),
        str(readers),
        str(go or ""),
        str(hold or ""),
        str(WAIT_S),
    ]
