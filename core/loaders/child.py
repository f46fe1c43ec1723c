"""The one child harness: one load by a loader that is not modelmon's, as its users run it, in
a fresh process that never imports modelmon (run by path; its siblings ``child_engines`` and
``child_touch`` are plain modules to it).

    python .../child.py ENGINE PATH [KNOB=VALUE ...]         # argument knobs; environment
                                                             # knobs arrive in the environment
    python .../child.py --features ENGINE [KNOB=VALUE ...]  # what it supports

modelmon runs it as a watched command (``runs.program``): the watch judges the load by the
bytes that arrive from storage; what this program prints is its own account. It imports the
engine, loads the model with the knobs given, then touches every loaded byte: one byte of
every 4 KiB page of every tensor (or, for llama.cpp, of every mapping of the model file), so
a lazy mapping that read nothing cannot pass for a load. Then it prints one JSON line: the
bytes touched, the tensors, its own seconds (load and touch; imports and set-up apart: a
load by several ranks has them all up first), the other ranks' reports, the engine's
version and the knob values this version supports. A knob value the installed version lacks,
or a knob word that is not KNOB=VALUE, ends it with exit code 2 and one line on stderr. It
dies with its parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.metadata
import json
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # run by path, its siblings are plain modules to it
    from modelmon.core.loaders.child_engines import ENGINES, REPORTED, SETUP, Unsupported, imports
else:
    from child_engines import ENGINES, REPORTED, SETUP, Unsupported, imports

UNSUPPORTED = 2  # exit code: a knob the installed version lacks, or not KNOB=VALUE
PR_SET_PDEATHSIG = 1
# A folder: once loaded, the program says so there (``loaded``) and waits, holding what it
# loaded, until ``release`` appears there (60 s at most), so that a test can look at it.
HOLD = "MODELMON_ENGINE_HOLD"
HOLD_S = 60.0


def die_with_parent() -> None:
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def check(engine: str, knobs: dict[str, str], features: dict[str, list[str]]) -> None:
    for name, value in knobs.items():
        if value not in features.get(name, [value]):
            raise Unsupported(
                f"{engine} {_version(ENGINES[engine][0])} here has no {name}={value} "
                f"(it takes {', '.join(features[name])})"
            )
    for name, value in os.environ.items():
        if name in features and value not in features[name]:
            raise Unsupported(f"{engine} here does not read {name}={value}")


def hold(folder: str | None) -> None:
    if not folder:
        return
    open(os.path.join(folder, "loaded"), "w").close()
    deadline = time.monotonic() + HOLD_S
    while not os.path.exists(os.path.join(folder, "release")) and time.monotonic() < deadline:
        time.sleep(0.01)


def status_bytes(field: str) -> int:
    """A byte figure of this process's /proc/self/status (VmHWM: its peak RSS; VmRSS: now).
    Not ``ru_maxrss``: Linux carries that across exec, so a child would report its parent's
    peak where that was higher."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def knobs_of(words: list[str]) -> dict[str, str]:
    if bad := [word for word in words if "=" not in word]:
        raise Unsupported(f"{bad[0]!r} is not KNOB=VALUE")
    return dict(word.split("=", 1) for word in words)


def main(argv: list[str]) -> int:
    # Its own folder stays off the import path, where it would shadow a library's module of
    # the same name as one of modelmon's here.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    probe = argv[:1] == ["--features"]  # what the installed version supports: no load
    args = argv[1:] if probe else argv
    if len(args) < (1 if probe else 2) or args[0] not in ENGINES:
        sys.stderr.write(f"usage: child.py {{{','.join(ENGINES)}}} PATH [KNOB=VALUE ...]\n")
        return 64
    engine = args[0]
    die_with_parent()
    distribution, features_of, load = ENGINES[engine]
    imported = time.perf_counter()
    try:
        knobs = knobs_of(args[1:] if probe else args[2:])
        features = features_of(knobs)
        if probe:
            print(json.dumps(features))
            return 0
        check(engine, knobs, features)
        for module in imports(engine, knobs):
            importlib.import_module(module)
        if engine in SETUP:
            SETUP[engine](args[1], knobs)
        imported = time.perf_counter() - imported
        rss_ready = status_bytes("VmRSS:")
        start = time.perf_counter()
        touched, tensors = load(args[1], knobs)
    except Unsupported as exc:
        print(f"modelmon engine {engine}: {exc}", file=sys.stderr)
        return UNSUPPORTED
    seconds = time.perf_counter() - start
    hold(os.environ.get(HOLD))
    report = {
        "engine": engine,
        "version": _version(distribution),
        "bytes": touched,
        "tensors": tensors,
        "seconds": seconds,
        "import_seconds": imported,
        "peak_rss": status_bytes("VmHWM:"),
        "rss_ready": rss_ready,
        "settings": knobs,
        "features": features,
        **REPORTED,
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
