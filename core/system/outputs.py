"""The one guard in front of every file modelmon writes: the CLI's ``-o`` and ``--csv``, the
app's exports, the desktop entry.

``check_output`` says, before any work, whether a path may be written, and what writing it
means: never one of the run's inputs under any name (compared by device and inode, so a
symlink, a hard link, ``/proc/self/fd/N`` or a bind mount is caught), never a file that is a
model (``system.model_files``: by its first bytes, so a copy of one or the file behind a
bucket's object too) unless the caller says models may be replaced, never a directory, a
FIFO, a socket or a device, never a file or folder that refuses the atomic write
(immutable, append-only, no room, read-only, gone); ``-``, ``/dev/stdout``, ``/dev/fd/1``
and ``/proc/self/fd/1`` are standard output, written as such. The folder is tried, not
trusted: an unnamed temporary file (``O_TMPFILE``) with room reserved for it, which leaves
nothing behind. Writers call it again right before writing (``check_output(...).write``),
since minutes of measuring may lie between the two.

``write_or_keep`` is for results that took a measurement to make: when the file asked for
cannot be written after all, they are kept in a free name beside it, else in modelmon's state
folder, and the caller says where.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from modelmon.core.errors import ModelmonError
from modelmon.core.system.atomic import write_atomic
from modelmon.core.system.files import not_regular
from modelmon.core.system.model_files import model_kind

STANDARD_OUTPUT = "standard output"
PROBE_BYTES = 64 << 10  # room a save must find: a config is a few kB, a results export more
MAX_LINKS = 40  # symlinks followed when looking for a named descriptor (the kernel's limit)
MAX_NUMBERED = 999  # name-2 … name-999: past that, the folder is not a place to keep things
FS_IOC_GETFLAGS = 0x80086601  # _IOR('f', 1, long) on 64-bit Linux; the kernel reads an int
FS_IMMUTABLE_FL = 0x10
FS_APPEND_FL = 0x20
# /proc/<pid>/fd (realpath turns /proc/self into /proc/<pid>, thread-self into .../task/<tid>)
DESCRIPTORS_FOLDER = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd")
NO_TMPFILE = (errno.EOPNOTSUPP, errno.EISDIR)  # a filesystem or kernel without O_TMPFILE
NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


@dataclass(frozen=True, slots=True)
class Output:
    """A place the guard accepted; ``write`` is the only way modelmon writes a file."""

    named: str  # as the user wrote it
    path: Path | None  # the regular file replaced (symlinks followed); None: standard output

    @property
    def is_stdout(self) -> bool:
        return self.path is None

    def __str__(self) -> str:
        return STANDARD_OUTPUT if self.path is None else self.named

    def write(self, payload: bytes, error: type[ModelmonError] = ModelmonError) -> None:
        """Write ``payload`` whole: atomically to the file, or to standard output."""
        if self.path is None:
            _to_stdout(payload, error)
        else:
            write_atomic(self.path, payload, error)


def _to_stdout(payload: bytes, error: type[ModelmonError]) -> None:
    stream = sys.stdout
    if stream is None:  # an app started without a console
        raise error("there is no standard output to write to; name a file")
    try:
        stream.flush()  # what was printed before comes first
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            buffer.write(payload)
            buffer.flush()
        else:
            stream.write(payload.decode())
            stream.flush()
    except (OSError, ValueError) as exc:
        reason = _reason(exc) if isinstance(exc, OSError) else str(exc)
        raise error(f"{STANDARD_OUTPUT}: write failed: {reason}") from None


def named_descriptor(text: str) -> int | None:
    """The descriptor of this process that ``text`` names through ``/proc/<pid>/fd`` (as
    ``/dev/stdout``, ``/dev/fd/2`` and ``/proc/self/fd/1`` do), else None."""
    if "\x00" in text:  # no file's name: the kernel's end of a name
        return None
    try:
        path = os.path.abspath(text)
    except OSError:  # relative, in a current folder that is gone: no descriptor's name
        return None
    for _ in range(MAX_LINKS):
        folder, name = os.path.split(path)
        folder = os.path.realpath(folder)
        match = DESCRIPTORS_FOLDER.fullmatch(folder)
        if match and int(match[1]) == os.getpid() and name.isdigit():
            return int(name)
        path = os.path.join(folder, name)
        try:
            link = os.readlink(path)
        except OSError:  # not a symlink, or nothing there
            return None
        path = os.path.normpath(os.path.join(folder, link))
    return None


def names_stdout(text: str) -> bool:
    return text == "-" or named_descriptor(text) == 1


def stdout_file_path() -> str | None:
    """The path of the regular file standard output is redirected to (``> modelmon.toml``),
    so what is written there can name itself; None for a terminal or a pipe."""
    try:
        if not stat.S_ISREG(os.fstat(1).st_mode):
            return None
        return os.readlink("/proc/self/fd/1") or None
    except OSError:
        return None


def stdout_file_name() -> str | None:
    """The name of the regular file standard output is redirected to, or None."""
    path = stdout_file_path()
    return (os.path.basename(path) or None) if path is not None else None


def absolute(path: str) -> str:
    """``path`` from the root, as a line pasted in another folder must name it (``path`` as
    it is where the current folder is gone)."""
    try:
        return os.path.abspath(path)
    except (OSError, ValueError):
        return path


def _inode_flags(path: Path) -> int:
    """The file's attribute flags (``lsattr``), 0 where the filesystem has none to say."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        answer = fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8))
        return int.from_bytes(answer[:4], sys.byteorder)
    except OSError:
        return 0
    finally:
        os.close(fd)


def _refuse_locked(path: Path, text: str, error: type[ModelmonError], folder: bool) -> None:
    flags = _inode_flags(path)
    what = f"{text}: cannot write here: {path}" if folder else f"{text}:"
    if flags & FS_IMMUTABLE_FL:
        raise error(f"{what} is immutable (chattr +i): nothing in it can change")
    if flags & FS_APPEND_FL:
        if folder:  # files can be added to it, never renamed into place
            raise error(f"{what} is append-only (chattr +a): a save renames a new file into place")
        raise error(f"{what} is append-only (chattr +a): it can be added to, never replaced")


def _probe(folder: Path, text: str, error: type[ModelmonError]) -> None:
    """Create a file in ``folder`` and reserve room in it; nothing stays behind."""
    try:
        fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno not in NO_TMPFILE:
            raise error(f"{text}: cannot write here: {_reason(exc)}") from None
        fd = _named_probe(folder, text, error)
    try:
        os.posix_fallocate(fd, 0, PROBE_BYTES)
    except OSError as exc:
        if exc.errno in NO_ROOM:
            raise error(f"{text}: cannot write here: {_reason(exc)} in {folder}") from None
        # Any other answer (a filesystem that cannot reserve room) leaves room unknown.
    finally:
        os.close(fd)


def _named_probe(folder: Path, text: str, error: type[ModelmonError]) -> int:
    """A probe by name, where the filesystem has no unnamed files; unlinked at once (the
    folder was checked not to be append-only, which would keep it)."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".modelmon-probe.", suffix=".tmp")
    except OSError as exc:
        raise error(f"{text}: cannot write here: {_reason(exc)}") from None
    try:
        os.unlink(name)
    except OSError as exc:
        os.close(fd)
        raise error(f"{text}: cannot write here: cannot remove {name}: {_reason(exc)}") from None
    return fd


def check_output(
    path: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str]] = (),
    error: type[ModelmonError] = ModelmonError,
    replace_models: bool = False,
    override: str = "",
) -> Output:
    """Where writing ``path`` would go, or ``error`` (one line) saying why it must not be
    written; ``inputs`` are every file the run reads (the model's files and index, a config).
    A file that is a model (``model_kind``) is replaced only with ``replace_models``; the
    refusal names ``override``, what lets it be (the CLI's flag), when there is one."""
    text = os.fspath(path)
    sources = tuple(os.fspath(source) for source in inputs)
    if not text.strip():
        raise error("the output path is empty; name a file (or - for standard output)")
    if "\x00" in text:
        raise error(f"{text}: a path cannot hold a NUL byte; name a file")
    descriptor = None if text == "-" else named_descriptor(text)
    if text == "-" or descriptor == 1:
        return Output(text, None)
    try:
        target = Path(os.path.realpath(text))  # a symlink keeps pointing at the file written
    except OSError as exc:  # a relative name in a current folder that is gone
        raise error(f"{text}: cannot write there: {_reason(exc)}") from None
    try:
        status: os.stat_result | None = os.stat(text)
    except FileNotFoundError:
        status = None
    except OSError as exc:  # a path through a file, a symlink loop, a name too long
        raise error(f"{text}: cannot write there: {_reason(exc)}") from None
    if status is not None:
        for source in sources:
            with contextlib.suppress(OSError):
                if os.path.samestat(status, os.stat(source)):
                    raise error(f"{text}: is the input {source}; name another output file")
        if stat.S_ISDIR(status.st_mode):
            raise error(f"{text}: is a directory; name a file to write")
        if not stat.S_ISREG(status.st_mode):
            raise error(
                f"{text}: {not_regular(status.st_mode)}; name a file, or - for standard output"
            )
        kind = None if replace_models else model_kind(text)
        if kind is not None:
            instead = f", or add {override} to replace it" if override else ""
            raise error(
                f"{text}: is {kind}, which a report never replaces; name another file{instead}"
            )
    if descriptor is not None:
        raise error(
            f"{text}: is descriptor {descriptor} of modelmon, not a file; "
            "name a file, or - for standard output"
        )
    if text.endswith("/"):
        raise error(f"{text}: names a folder; name a file to write")
    if status is not None:
        _refuse_locked(target, text, error, folder=False)
    _refuse_locked(target.parent, text, error, folder=True)
    _probe(target.parent, text, error)
    return Output(text, target)


def state_home(environ: Mapping[str, str] = os.environ) -> Path:
    """modelmon's own state, the one place every front end keeps what it keeps (results it
    could not write where asked, kept answers, readahead records, the app's crash log):
    ``$XDG_STATE_HOME/modelmon``, else ``~/.local/state/modelmon``."""
    base = environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "modelmon"


def state_folder() -> Path:
    """Where results are kept when the file asked for could not take them."""
    return state_home() / "unsaved"


def kept_answer_path(model_name: str, now: float | None = None) -> Path:
    """Where a recommendation's config file is kept where no file of the user's holds it (the
    app's answer the moment its search ends; the CLI's ``-o -`` into a pipe), so that the line
    to paste names a file that exists: ``$XDG_STATE_HOME/modelmon/recommendations/
    MODEL-YYYYmmdd-HHMMSS.toml`` (``~/.local/state`` without it)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", model_name).strip(".-") or "model"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return state_home() / "recommendations" / f"{name[:80]}-{stamp}.toml"


def free_name(folder: Path, name: str) -> Path:
    """``folder/name``, else the first free one of name-2, name-3 … (before the suffix)."""
    stem, suffix = os.path.splitext(name)
    for number in range(1, MAX_NUMBERED + 1):
        candidate = folder / (name if number == 1 else f"{stem}-{number}{suffix}")
        if not os.path.lexists(candidate):
            return candidate
    raise ModelmonError(f"{folder / name}: it and {MAX_NUMBERED - 1} numbered names are taken")


@dataclass(frozen=True, slots=True)
class Saved:
    """Where ``write_or_keep`` put a payload, and why not where it was asked to."""

    where: str | None  # the output asked for, a file kept instead; None: nowhere
    name: str  # the file name it was written under
    failure: str | None = None  # one line: why the output asked for was not written
    # What the payload names itself by (``render``'s argument): the absolute path of the file
    # written where it is known, else its name.
    named: str = ""
    # A copy kept of what went to a pipe or a terminal, which ``named`` is (``stdout_copy``).
    copy: str | None = None


def _keep_copy(
    path: Path,
    sources: tuple[str | os.PathLike[str], ...],
    render: Callable[[str], bytes],
    error: type[ModelmonError],
) -> str | None:
    """``render`` of ``path``'s own name written to ``path`` (a free name in its folder)
    through the guard, and that name; None where it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        kept = absolute(str(free_name(path.parent, path.name)))
        check_output(kept, sources, error).write(render(kept), error)
    except (ModelmonError, OSError):
        return None
    return kept


def write_or_keep(
    path: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str]],
    render: Callable[[str], bytes],
    error: type[ModelmonError] = ModelmonError,
    default_name: str = "modelmon.out",
    replace_models: bool = False,
    override: str = "",
    stdout_copy: Path | None = None,
) -> Saved:
    """Write ``render(name)`` to ``path`` through the guard (``replace_models``, ``override``:
    as ``check_output``'s); if that fails, keep it in a free name beside ``path``, else in
    ``state_folder()``: under ``default_name`` where ``path`` names a model (a report kept as
    ``model-2.safetensors`` would pass for one). ``render`` is given the absolute path of the
    file the payload is written to (a config names its own file in its snippets, and a line
    pasted in another folder must find it); of standard output, the file it is redirected to;
    of a pipe or a terminal, ``stdout_copy`` where one is given (a copy is kept there, so
    that the name is of a file that exists: ``Saved.copy``), else the name alone."""
    text, sources = os.fspath(path), tuple(inputs)
    to_stdout = names_stdout(text)
    name = (stdout_file_name() if to_stdout else Path(text).name) or default_name
    named = (stdout_file_path() or name) if to_stdout else absolute(text)
    copy = None
    if to_stdout and stdout_file_path() is None and stdout_copy is not None:
        copy = _keep_copy(stdout_copy, sources, render, error)
        named = copy or named
    payload = render(named)
    try:
        output = check_output(text, sources, error, replace_models, override)
        output.write(payload, error)
        return Saved(str(output), name, named=named, copy=copy)
    except ModelmonError as exc:
        failure = str(exc)
    if not to_stdout and ("\x00" in name or (not replace_models and model_kind(text))):
        name = default_name
    beside = []
    # A relative name in a current folder that is gone, a NUL byte: no folder beside it.
    with contextlib.suppress(OSError, ValueError):
        beside = [] if to_stdout else [Path(os.path.realpath(text)).parent]
    for folder in [*beside, state_folder()]:
        try:
            if folder not in beside:  # the user's folder, if gone, is never made again
                folder.mkdir(parents=True, exist_ok=True)
            kept = free_name(folder, name)
            check_output(kept, sources, error).write(render(absolute(str(kept))), error)
        except (ModelmonError, OSError):
            continue
        return Saved(str(kept), kept.name, failure, absolute(str(kept)))
    if name != named:  # shown where it would have been written: by the name it was for
        render(name)
    return Saved(None, name, failure, name)
