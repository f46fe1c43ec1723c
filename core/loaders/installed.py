"""What the installed engines take: each knob's values as the version installed here has them.

The registry lists the values modelmon knows for each knob; an installed version may take
fewer (``disable_mmap`` only ``false`` on a transformers older than the argument). The engine's
own child (``child.py --features ENGINE``, a fresh process that never imports modelmon)
looks at the installed version and says, as JSON, what it takes. ``installed_knobs`` asks it
for every engine that runs here, all at once, each probe in its own child process with a time
limit: a probe that fails or does not answer in time says why in one line, and the others are
not held up by it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from modelmon.core.loaders.registry import CHILD, ENGINES, get_engine

# Importing torch (transformers, diffusers) takes seconds, many more on a busy machine.
PROBE_TIMEOUT_S = 60.0
KILL_GRACE_S = 2.0  # a probe killed at its time limit is reaped within this, or left


@dataclass(frozen=True, slots=True)
class InstalledKnobs:
    """One engine's knobs as the version installed here takes them, or why that is unknown."""

    engine: str  # its registry name
    values: dict[str, tuple[str, ...]] | None  # knob -> the values it takes; None: unknown
    error: str | None = None  # why unknown, in one line: the probe failed or timed out

    def missing(self, knob: str, known: Iterable[str]) -> list[str]:
        """The values of ``known`` this version does not take (none when unknown)."""
        if self.values is None or knob not in self.values:
            return []
        return [value for value in known if value not in self.values[knob]]


def installed_knobs(
    engines: Iterable[str] | None = None, timeout_s: float = PROBE_TIMEOUT_S
) -> dict[str, InstalledKnobs]:
    """Each engine of ``engines`` (all by default) that runs here, by name: its knobs as the
    installed version takes them, asked of its child, all probes at once, each given at most
    ``timeout_s``. Engines that do not run here are left out."""
    names = [
        name
        for name in (ENGINES if engines is None else engines)
        if get_engine(name).unavailable() is None
    ]
    if not names:
        return {}
    with ThreadPoolExecutor(len(names), thread_name_prefix="modelmon-probe") as pool:
        probes = {name: pool.submit(_probe, name, timeout_s) for name in names}
    return {name: probe.result() for name, probe in probes.items()}


def _probe(engine: str, timeout_s: float) -> InstalledKnobs:
    """Ask ``child.py --features ENGINE``; never waits past the time limit and the
    grace for the kill."""
    try:
        child = subprocess.Popen(
            [sys.executable, str(CHILD), "--features", engine],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except OSError as exc:
        return InstalledKnobs(engine, None, f"its probe could not start: {exc.strerror or exc}")
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.communicate(timeout=KILL_GRACE_S)
        return InstalledKnobs(engine, None, f"its probe did not answer within {timeout_s:g} s")
    if child.returncode != 0:
        last = next((line for line in reversed(err.splitlines()) if line.strip()), "")
        said = f": {last.strip()}" if last else ""
        return InstalledKnobs(
            engine, None, f"its probe failed (exit code {child.returncode}){said}"
        )
    return _answer(engine, out)


def _answer(engine: str, out: str) -> InstalledKnobs:
    """The probe's JSON line: {knob: [value, ...]} for the engine's knobs."""
    try:
        answer = json.loads(out)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not all(
        isinstance(values, list) and all(isinstance(v, str) for v in values)
        for values in answer.values()
    ):
        shown = out.strip()[:80] or "nothing"
        return InstalledKnobs(engine, None, f"its probe answered {shown!r}, not its knobs")
    return InstalledKnobs(engine, {str(k): tuple(v) for k, v in answer.items()})
