"""Every file modelmon writes goes through the one guard (``core/system/outputs.py``).

A contract over the source, as test_boundaries.py holds the layers: a call that creates or
replaces a file (``open`` for writing, ``write_text``, ``os.replace``, ``mkstemp``...) may sit
only in the modules listed below, each for the reason given; everything else writes with
``check_output(path, inputs).write(payload)`` (or ``write_or_keep``, ``write_config``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("core", "gui", "modelmon", "resources")
ATOMIC = "modelmon.core.system.atomic"

# module -> why it may create or replace files itself
OWN_WRITERS = {
    "core/system/atomic.py": "the atomic writer behind the guard (temp file, fsync, rename)",
    "core/system/outputs.py": "the guard: its probe files, standard output",
    "core/system/readahead.py": "the kernel's read_ahead_kb, and modelmon's lock and restore "
    "records in its own state folder",
    "core/model/synth.py": "writes test and demo models into a folder it is given",
    "core/model/synth_gguf.py": "writes test and demo GGUF models into a folder it is given",
    "core/system/device_use.py": "the machine-wide lock file and activity log of each device, "
    "in /run/lock",
    "core/system/readahead_records.py": "the restore records of readahead a run changed, in "
    "modelmon's own state folder",
    "core/system/proc_status.py": "writes the kernel's /proc/self/clear_refs to reset this "
    "process's peak RSS, and /proc/self/oom_score_adj to offer a worker to the OOM killer",
    "modelmon/cli/common.py": "opens /dev/null for writing, to point a stdout whose reader has "
    "gone at nowhere",
    "core/model/demo.py": "the demo models, built in its own scratch folder; only entries its "
    "recipe.json says it made are replaced",
    "core/system/memory_cgroup.py": "the memory cgroups it makes for a run under a limit: their "
    "control files (memory.limit_in_bytes, cgroup.procs...) in /sys/fs/cgroup",
    "core/loading/shared_copy.py": "maps the one copy of a model the ranks of a node share: "
    "a memfd of modelmon's own, opened read-write through its holder's /proc/PID/fd/N",
    "gui/crash_log.py": "the app's own crash log in its state folder (0600, never a link): "
    "appends and rotates it to crash.log.1 past its size cap",
    "core/runs/compile_cache.py": "the compile-cache folders of a server's runs, made new "
    "under the temporary folder, removed at the experiment's end (by a guardian if killed)",
    "core/loaders/child.py": "an engine's run, a child that never imports modelmon (so "
    "not its guard either): only with MODELMON_ENGINE_HOLD set (tests), an empty 'loaded' "
    "marker in the folder it names",
}
# module.function calls that create, replace or link files
MODULE_WRITERS = {
    "os": {"replace", "rename", "renames", "link", "symlink", "truncate", "mkfifo", "mknod"},
    "shutil": {"copy", "copy2", "copyfile", "copytree", "move"},
    "tempfile": {"mkstemp", "mkdtemp", "NamedTemporaryFile"},  # TemporaryFile has no name
    "dataclasses": set(),  # dataclasses.replace makes a record, not a file
}
# pathlib methods that write (Path.replace takes one argument; str.replace takes two)
PATH_WRITERS = {"write_text", "write_bytes", "rename", "symlink_to", "hardlink_to", "touch"}
WRITING_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND", "O_TMPFILE"}


def _writes(call: ast.Call) -> str | None:
    """What makes ``call`` a write, or None."""
    func = call.func
    if isinstance(func, ast.Name) and func.id == "open":
        mode = call.args[1] if len(call.args) > 1 else None
        mode = mode or next((k.value for k in call.keywords if k.arg == "mode"), None)
        if isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+"):
            return f"open(..., {mode.value!r})"
        return None
    if isinstance(func, ast.Name) and func.id == "write_atomic":
        return "write_atomic"
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value.id if isinstance(func.value, ast.Name) else None
    if owner in MODULE_WRITERS:
        if func.attr in MODULE_WRITERS[owner]:
            return f"{owner}.{func.attr}()"
        if owner == "os" and func.attr == "open":
            flags = {n.attr for n in ast.walk(call) if isinstance(n, ast.Attribute)}
            if flags & WRITING_FLAGS:
                return "os.open(... writing flags)"
        return None
    if func.attr in PATH_WRITERS or (func.attr == "replace" and len(call.args) == 1):
        return f".{func.attr}()"
    return None


def test_every_writer_goes_through_the_guard() -> None:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in OWN_WRITERS:
                continue
            for node in ast.walk(ast.parse(path.read_text(), name)):
                if isinstance(node, ast.Call) and (what := _writes(node)):
                    found.append(f"{name}:{node.lineno}: {what}")
                elif isinstance(node, ast.ImportFrom) and node.module == ATOMIC:
                    found.append(f"{name}:{node.lineno}: imports the writer behind the guard")
    assert not found, (
        "files written around the guard (use modelmon.core.system.outputs.check_output("
        "path, inputs).write(payload), or add the module to OWN_WRITERS with why):\n  "
        + "\n  ".join(found)
    )


def test_the_contract_sees_writes() -> None:
    """The scan finds each kind of write it names (so an empty answer means something)."""
    source = """
open(p, "w"); open(p, mode="ab"); Path(p).write_text("x"); os.replace(a, b)
write_atomic(p, b""); os.open(p, os.O_WRONLY | os.O_CREAT); tempfile.mkstemp()
"""
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    kinds = {_writes(c) for c in calls} - {None}
    assert len(kinds) == 7, kinds
    reads = "open(p); open(p, 'rb'); text.replace('a', 'b'); os.open(p, os.O_RDONLY)"
    assert not {_writes(c) for c in ast.walk(ast.parse(reads)) if isinstance(c, ast.Call)} - {None}
