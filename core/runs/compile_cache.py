"""A server's compile caches as an experiment: where its engine keeps what torch.compile,
Inductor and Triton computed, pointed at folders modelmon owns, empty for each run ("fresh":
a node's first start) or kept from run to run of one experiment ("kept": a persisted volume,
as ``vllm bench startup``'s warm start keeps them).

The user's own cache folders are never touched: every variable that names one is set for the
run, to a folder under this experiment's root. The root is removed when the experiment ends,
by a guardian when modelmon is killed (``system.guardian``), else by the next experiment
(``remove_stale``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from modelmon.core.configuration import ProgramConfig
from modelmon.core.system.cgroup_guardian import start_ticks
from modelmon.core.system.guardian import Guardian

# The variables the engines read their compile caches from: vLLM's root (its
# torch_compile_cache and AOT artefacts), Inductor's and Triton's own (which vLLM, SGLang
# and transformers' torch.compile use), and SGLang's.
CACHE_VARIABLES = (
    "VLLM_CACHE_ROOT",
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
    "SGLANG_CACHE_DIR",
)
PREFIX = "modelmon-compile-"
_NAME = re.compile(rf"^{PREFIX}(\d+)-(\d+)-")  # modelmon-compile-PID-START-...
REMOVE = """
import shutil, sys
shutil.rmtree(sys.argv[1], ignore_errors=True)
"""


class CompileCaches:
    """The compile-cache folders of one experiment (an A/B, a recommendation): a new one for
    each run of a "fresh" program, one per "kept" program for all its runs. Use it as a
    context manager; everything it made is gone after."""

    def __init__(self, base: str | None = None) -> None:
        base_path = Path(base or tempfile.gettempdir())
        remove_stale(base_path)
        owner = f"{os.getpid()}-{start_ticks(os.getpid()) or 0}-"
        self.root = Path(tempfile.mkdtemp(prefix=PREFIX + owner, dir=base_path))
        try:
            self._guardian: Guardian | None = Guardian(REMOVE, [str(self.root)])
        except OSError:
            self._guardian = None  # removed on every way out this process sees
        self._kept: dict[str, Path] = {}
        self._runs = 0

    @contextlib.contextmanager
    def environment(self, program: ProgramConfig) -> Iterator[dict[str, str]]:
        """The variables ``program``'s run is started with (none where it asks for no compile
        cache); a fresh run's folder is removed when the run is over."""
        if program.compile_cache is None:
            yield {}
            return
        if program.compile_cache == "kept":
            folder = self._kept.get(program.code)
            if folder is None:
                folder = self._kept[program.code] = self.root / f"kept-{len(self._kept) + 1}"
            yield _pointed_at(folder)
            return
        self._runs += 1
        folder = self.root / f"fresh-{self._runs}"
        try:
            yield _pointed_at(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def kept_bytes(self, program: ProgramConfig) -> int:
        """What ``program``'s kept caches hold now (0 for none): what a volume would keep."""
        folder = self._kept.get(program.code)
        if folder is None:
            return 0
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if self._guardian is not None:
            self._guardian.release()
            self._guardian = None

    def __enter__(self) -> CompileCaches:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _pointed_at(folder: Path) -> dict[str, str]:
    """Every cache variable at its own subfolder of ``folder`` (made now)."""
    found = {}
    for variable in CACHE_VARIABLES:
        path = folder / variable.lower()
        path.mkdir(parents=True, exist_ok=True)
        found[variable] = str(path)
    return found


def asks_compile_cache(*programs: object) -> bool:
    """Whether any of these configurations asks for a compile cache of modelmon's."""
    return any(isinstance(p, ProgramConfig) and p.compile_cache is not None for p in programs)


def remove_stale(base: Path) -> list[Path]:
    """Remove the compile-cache roots in ``base`` of modelmon processes that are gone."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            found = _NAME.match(entry.name)
            if found is None or not entry.is_dir():
                continue
            pid, ticks = int(found.group(1)), int(found.group(2))
            now = start_ticks(pid)
            if now is not None and ticks in (now, 0):
                continue  # its owner still runs
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed
