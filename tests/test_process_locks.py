"""House rule: cross-process coordination survives any participant's death. A multiprocessing
Event, Condition, Lock, Semaphore, Barrier, Queue or Manager can be held (or waited on) by a
process that is then killed, and the others wait for ever: none may appear in the code that
ships. (Threads die only with their process: ``threading`` primitives are fine.)"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRIMITIVES = {
    "Event",
    "Condition",
    "Lock",
    "RLock",
    "Semaphore",
    "BoundedSemaphore",
    "Barrier",
    "Queue",
    "JoinableQueue",
    "SimpleQueue",
    "Manager",
}


def process_primitives(source: str) -> list[str]:
    """Where ``source`` makes or imports a multiprocessing primitive: ``mp.Lock()``,
    ``ctx.Event()`` on a context from ``get_context``, ``context.Lock()`` on a parameter named
    like one, ``from multiprocessing import Lock``, ``multiprocessing.synchronize``."""
    tree = ast.parse(source)
    modules = {"multiprocessing"}
    contexts: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "multiprocessing":
                    modules.add(alias.asname or alias.name)
                elif alias.name.startswith("multiprocessing.synchronize"):
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("multiprocessing"):
            names = {alias.name for alias in node.names}
            if node.module == "multiprocessing.synchronize" or names & PRIMITIVES:
                found.append(f"line {node.lineno}: from {node.module} import {sorted(names)}")
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value.func
            if isinstance(call, ast.Attribute) and call.attr == "get_context":
                contexts |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        name = owner.id if isinstance(owner, ast.Name) else None
        named_like_a_context = name is not None and ("context" in name or name == "ctx")
        made_from_a_context = (
            isinstance(owner, ast.Call)
            and isinstance(owner.func, ast.Attribute)
            and owner.func.attr == "get_context"
        )
        if node.func.attr in PRIMITIVES and (
            name in modules or name in contexts or named_like_a_context or made_from_a_context
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_checker_finds_each_form() -> None:
    forms = [
        "import multiprocessing as mp\nstop = mp.Event()",
        "import multiprocessing\nc = multiprocessing.get_context('spawn')\ngo = c.Event()",
        "def f(context):\n    return context.Lock()",
        "from multiprocessing import Lock",
        "from multiprocessing.synchronize import Event",
        "import multiprocessing\nq = multiprocessing.get_context('spawn').Queue()",
    ]
    assert all(process_primitives(form) for form in forms)
    fine = "import threading\nimport multiprocessing as mp\nstop = threading.Event()\nmp.Pipe()"
    assert process_primitives(fine) == []


def test_no_multiprocessing_primitive_in_the_shipped_code() -> None:
    found = {
        str(path.relative_to(ROOT)): hits
        for folder in ("core", "gui", "modelmon")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (hits := process_primitives(path.read_text()))
    }
    assert found == {}, found
