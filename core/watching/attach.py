"""What a watch may be asked to do: the options it takes, and which running process it may
attach to (``watch --pid``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from modelmon.core.errors import OptionsError, WatchError
from modelmon.core.limits import MAX_QUIET_S, MIN_QUIET_S, range_text
from modelmon.core.options import CACHE_MODES
from modelmon.core.watching.ready import ReadyCondition

PF_KTHREAD = 0x00200000  # /proc/PID/stat flags: a kernel thread
NUL = "\x00"


def unwatchable(pid: int) -> str | None:
    """Why a process cannot be watched from this one, or None: itself and its ancestors
    (its own sampling would keep the tree from ever going quiet, and it would wait for its own
    end) and kernel threads (no files, no end) are refused."""
    if pid == os.getpid():
        return "that is modelmon itself"
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
        fields = data[data.rindex(b")") + 2 :].split()
        flags = int(fields[6])
    except (OSError, ValueError, IndexError):
        return None  # gone or unreadable: attaching says so in its own words
    if fields[0] in (b"Z", b"X"):
        return "it has already exited (a zombie its parent has not reaped): nothing to watch"
    if flags & PF_KTHREAD:
        return "a kernel thread, which loads no model"
    ancestor = os.getppid()
    while ancestor > 1:
        if ancestor == pid:
            return "an ancestor of modelmon (say, the shell it runs in): watch its loader's pid"
        try:
            with open(f"/proc/{ancestor}/stat", "rb") as stat:
                data = stat.read()
            ancestor = int(data[data.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    if pid == 1:
        return "init, an ancestor of every process: watch its loader's pid"
    return None


def check_watch(
    command: Sequence[str] | None,
    pid: int | None,
    cache: str | None,
    quiet_s: float | None,
    interval_s: float,
    ready: ReadyCondition | None = None,
    after_ready: str | float = "stop",
    ready_timeout_s: float | None = None,
) -> None:
    """OptionsError, in one line, for a watch that cannot be done as asked."""
    if (command is None or not list(command)) == (pid is None):
        raise OptionsError("watch a command or a pid: one of the two")
    if not interval_s > 0:
        raise OptionsError(f"the sampling interval must be positive, not {interval_s}")
    if quiet_s is not None and not MIN_QUIET_S <= quiet_s <= MAX_QUIET_S:
        raise OptionsError(
            f"--quiet must be {range_text(MIN_QUIET_S, MAX_QUIET_S)} s, not {quiet_s}: a "
            "shorter quiet is a pause between two reads, not a program done loading"
        )
    if cache is not None and cache not in CACHE_MODES:
        raise OptionsError(f"unknown cache mode {cache!r}: use cold, warm or keep")
    if pid is not None and cache not in (None, "keep"):
        raise OptionsError(
            "--cache applies to a command modelmon starts: a running process has already "
            "read what it read (attached, the cache is kept as it is)"
        )
    if ready is not None:
        ready.check()
    asked = (ready is not None and ready.asked) or ready_timeout_s is not None
    if pid is not None and (asked or after_ready != "stop"):
        raise OptionsError(
            "--ready-* and --after-ready apply to a command modelmon starts: a running "
            "process's cold start is over"
        )
    if isinstance(after_ready, str) and after_ready not in ("stop", "watch"):
        raise OptionsError(f"after ready: stop, watch or a number of seconds, not {after_ready!r}")
    if not isinstance(after_ready, str) and not 0 <= after_ready <= MAX_QUIET_S:
        raise OptionsError(
            f"seconds to watch after ready: {range_text(0, MAX_QUIET_S)}, not {after_ready}"
        )
    if ready_timeout_s is not None and not ready_timeout_s > 0:
        raise OptionsError(f"the ready timeout must be positive, not {ready_timeout_s}")
    if pid is not None:
        refusal = unwatchable(pid)
        if refusal is not None:
            raise OptionsError(f"--pid {pid}: {refusal}")


def check_command(command: Sequence[str] | None, env: Mapping[str, str] | None) -> None:
    """WatchError, in one line and before anything runs, for a command no program can be
    started with: one string (not a list of words), a word neither a string nor a path, a
    word or an environment variable holding a NUL byte (the kernel takes each as a NUL-ended
    string), a variable's name empty or holding "=" (another variable then)."""
    if isinstance(command, (str, bytes)):  # else each of its characters would be a word
        raise WatchError(
            f"cannot run {command!r}: a command is a list of words "
            "(['python', 'load.py', 'MODEL']), not one string"
        )
    raw = list(command or ())
    for number, word in enumerate(raw, 1):
        if not isinstance(word, (str, bytes, os.PathLike)):
            raise WatchError(
                f"cannot run the command: its word {number} is {type(word).__name__} "
                f"{word!r:.40}, not a string or a path"
            )
    words = [os.fsdecode(word) for word in raw]
    if not words:
        return
    program = words[0]
    for number, word in enumerate(words, 1):
        if NUL in word:
            raise WatchError(
                f"cannot run {program!r}: its word {number}, {word!r}, holds a NUL byte, "
                "which no program can take"
            )
    for name, value in (env or {}).items():
        text = os.fsdecode(name)
        if not text or "=" in text or NUL in text:
            raise WatchError(
                f"cannot run {program!r}: environment variable name {text!r}: a name is not "
                "empty and holds no = or NUL byte"
            )
        if NUL in os.fsdecode(value):
            raise WatchError(
                f"cannot run {program!r}: environment variable {text}: its value holds a NUL "
                "byte, which no program can take"
            )
