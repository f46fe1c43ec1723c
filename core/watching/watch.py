"""Watch a program load its model: run a command, or attach to a running process, and see it
from outside until it ends.

A command starts in a session (and process group) of its own, after the page cache of the
model it names was prepared (cold by default, verified, as for modelmon's own loads). The
watch ends when:
- the command exits (or the attached process does);
- a started command is ready, or not ready by its timeout (``serving``): it is stopped;
- ``quiet_s`` is set and the tree has been quiet that long (no model page arriving, under
  10 % of a core, under 1 MB/s read) after it touched the model: a command is stopped
  (SIGTERM to its group and tree, SIGKILL 3 s later), an attached process left alone;
  attached, ``quiet_s`` defaults to 5 s;
- ``cancel()`` is called (Ctrl+C): a command is stopped as above, nothing is left behind.
Every wait has a way out: pidfd polls of POLL_S that look at the cancel flag; a process of
the tree stopped (SIGSTOP) is said as the watch waits for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from modelmon.core.errors import WatchError
from modelmon.core.loading.envelope import StartGate
from modelmon.core.loading.reads import ReadLog, now_ns
from modelmon.core.metrics.sampler import Sampler
from modelmon.core.options import CacheMode
from modelmon.core.system import cache
from modelmon.core.system.open_files import usual_open_files_in_child, watch_open_files
from modelmon.core.system.readiness import wait_readable
from modelmon.core.watching import exits, naming
from modelmon.core.watching.assemble import Ending, assemble
from modelmon.core.watching.attach import check_command, check_watch
from modelmon.core.watching.files import (
    ModelFiles,
    changed_files,
    file_stamp,
    swap_moved,
    swap_pages,
)
from modelmon.core.watching.limit import WatchMemory
from modelmon.core.watching.observer import Observer, Progress
from modelmon.core.watching.orphans import (
    end_with_parent,
    hold_subreaper,
    own_children,
    release_subreaper,
)
from modelmon.core.watching.ready import ReadyCondition
from modelmon.core.watching.result import Reference, WatchResult
from modelmon.core.watching.serving import AfterReady, Serving
from modelmon.core.watching.sources import WATCH_SOURCES, WatchTarget
from modelmon.core.watching.stopping import (
    POLL_S,
    end_and_reap,
    leftovers,
    stop_started,
)

ATTACHED_QUIET_S = 5.0
# A process of the tree stopped this long (SIGSTOP, a debugger) is said, once, as it happens:
# the watch waits for it, and the user sees why (``exits.newly_stopped``).
STOPPED_SAY_S = 10.0
# After the command exits, what it left running is watched until the model has not arrived
# for this long (a launcher's loader still loading), then stopped.
LEFTOVER_QUIET_S = 3.0
MAP_INTERVAL_S = 0.5  # between residency maps (the sampler's default)


class Watch:
    """One watched run. ``run()`` blocks and returns the result; ``cancel()`` from any thread
    (or a signal handler). While it runs, ``reads`` (the arrivals, as a load's read log),
    ``sampler`` (the metric series), ``files`` and ``t0_ns`` are what the app plots live.

    ``model``: the model (or models) whose files count, each named as every verb names one:
    a file, a shard index (its shards), a folder, ``hf:ORG/NAME`` or ``ollama:NAME``; a bad
    one raises what ``open_model`` raises for it."""

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        pid: int | None = None,
        model: naming.WatchedModel = (),
        cache: CacheMode | None = None,
        quiet_s: float | None = None,
        interval_s: float = 0.1,
        stdout: int | None = None,
        stderr: int | None = None,
        references: Sequence[Reference] = (),
        env: Mapping[str, str] | None = None,
        start_gate: StartGate | None = None,
        map_interval_s: float = MAP_INTERVAL_S,
        memory_limit: int | None = None,
        ready: ReadyCondition | None = None,
        after_ready: AfterReady = "stop",
        ready_timeout_s: float | None = None,
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        check_watch(command, pid, cache, quiet_s, interval_s, ready, after_ready, ready_timeout_s)
        check_command(command if pid is None else None, env)
        named, bucket = naming.watched_models(model, attached=pid is not None)
        self.command = tuple(command) if command is not None and pid is None else None
        self.pid = pid
        self.attached = pid is not None
        self.memory = WatchMemory(memory_limit, self.attached)  # its cgroup: watching.limit
        self.cache_mode: CacheMode = cache or ("keep" if self.attached else "cold")
        self.quiet_s = quiet_s if quiet_s is not None or not self.attached else ATTACHED_QUIET_S
        self.interval_s = interval_s
        self.map_interval_s = map_interval_s  # between the sampler's residency maps
        self.stdout, self.stderr = stdout, stderr
        self.env = dict(env) if env is not None else None
        # Called once the cache is prepared and measured, just before the command starts (a
        # fleet node waits there for the others); False: the command is not started.
        self.start_gate = start_gate
        self.references = tuple(references)
        self.reads = ReadLog()
        self._named = naming.named_files(named)  # the weight files of the models given
        self.files = ModelFiles(self._named, [m.folder for m in named if m.folder])
        self.observer = Observer(self.files, self.reads, interval_s)
        self.observer.bucket = bucket
        self.sampler: Sampler | None = None
        self.t0_ns = 0
        self.notes: list[str] = []
        self._cancel = threading.Event()
        self._process: subprocess.Popen[Any] | None = None
        self._subreaper = False  # held from the command's start to its reaping
        self._exit_seen_ns: int | None = None  # when the command was first seen exited
        self._stamps: dict[str, tuple[int, int] | None] = {}  # the model files at the start
        # Hears what the watch has to say while it runs (a process of the tree stopped).
        self.on_notice = on_notice
        self._said_stopped: set[int] = set()
        # A started command's ready: the first of the conditions (a listening socket of the
        # tree by default); then the watch ends, goes on ("watch") or ends that many s later.
        self.serving = (
            Serving(ready or ReadyCondition(), after_ready, ready_timeout_s)
            if self.command is not None
            else None
        )

    def cancel(self) -> None:
        self._cancel.set()

    def progress(self) -> Progress:
        """What the watch has seen so far (safe from any thread while it runs)."""
        return self.observer.progress()

    # --- the run -------------------------------------------------------------------------------

    def run(self) -> WatchResult:
        with self.memory.held(), watch_open_files():  # a descriptor per model file it follows
            try:
                return self._run()
            finally:
                if self.serving is not None:
                    self.serving.stop()

    def _run(self) -> WatchResult:
        swap_before = swap_pages()
        state = self._prepare()
        measured = state if state is not None else cache.not_measured(self.cache_mode)
        if self.start_gate is not None and not self.start_gate(measured):
            self.observer.close()
            raise WatchError("the command was not started: its start gate said no")
        root = self._begin()
        ending: Ending | None = None
        try:
            ending = self._wait(root)
        finally:
            if ending is None:  # an error or an interrupt in the wait: nothing left behind
                self._stop_command(root)
            try:
                self._finish(root)
            finally:
                if self._subreaper:
                    release_subreaper()
                    self._subreaper = False
            if ending is None:
                self.observer.close()
        code, signal_name = self.exit_status()
        if signal_name is not None and ending.ended_by == "exit":
            ending = dataclasses.replace(ending, status="killed")
        ending = dataclasses.replace(ending, exit_code=code, signal=signal_name)
        swap = swap_moved(swap_before, swap_pages())
        try:
            return assemble(
                self.observer,
                self.sampler,
                command=self.command,
                pid=root,
                attached=self.attached,
                t0_ns=self.t0_ns,
                ending=ending,
                cache=state,
                swap=swap,
                notes=self._notes(),
                references=self.references,
                changed_files=changed_files(self._stamps, self.files),
                memory=self.memory.cgroup,
                ready=self.serving.ready if self.serving is not None else None,
                lines=self.serving.lines if self.serving is not None else (),
            )
        finally:
            self.observer.close()

    def _prepare(self) -> cache.CacheState | None:
        """The named model files, their cache put in the requested state and measured."""
        if self.observer.bucket is not None:  # nothing of a bucket is cached here
            return cache.of_objects(self.cache_mode)
        named = self._named
        if not named and self.command is not None:  # the model its arguments name, if any
            models, notes = naming.models_in_arguments(self.command)
            named = naming.named_files(models)
            self.notes += notes
        self.files.add_named(named)
        paths = [f.path for f in self.files.files]
        if not paths:
            if not self.attached:
                self.notes.append(
                    "the cache could not be prepared: no model was named (--model, or in the "
                    "command's arguments a model file, shard index, folder, hf: or ollama: "
                    "reference); each file counts from when the program was first seen with "
                    "it open or mapped"
                )
            return None
        return cache.prepare(paths, self.cache_mode)

    def _begin(self) -> int:
        """Start (or attach to) the program and the sampling; the root pid."""
        self._stamps = {f.path: file_stamp(f.path) for f in self.files.files}
        started = now_ns()
        self.observer.track(list(self.files.files), started)
        if self.command is None:
            assert self.pid is not None
            self.t0_ns = now_ns()
            try:
                self.observer.set_root(self.pid, self.t0_ns, attached=True)
            except ProcessLookupError:
                self.observer.close()
                raise WatchError(f"no process {self.pid} to attach to") from None
            self._start_sampler()
            return self.pid
        stdout, stderr, env = self.stdout, self.stderr, self.env
        if self.serving is not None:
            try:
                stdout, stderr, env = self.serving.streams(stdout, stderr, env)
            except BaseException:
                self.observer.close()
                raise
        self._subreaper = hold_subreaper()  # a daemon the command leaves stays in reach
        self._start_sampler()
        self.t0_ns = now_ns()
        try:
            self._process = subprocess.Popen(
                self.command,
                start_new_session=True,
                stdin=subprocess.DEVNULL,  # never the user's terminal or a pipe into modelmon
                stdout=stdout,
                stderr=stderr,
                env=env,
                close_fds=True,
                preexec_fn=self.memory.preexec(  # in the child: system calls only
                    usual_open_files_in_child(end_with_parent(os.getpid()))
                ),
            )
        except BaseException as error:  # nothing of the watch is left running, whatever it was
            if self.serving is not None:
                self.serving.stop()
            self._stop_sampler()
            self.observer.close()
            if self._subreaper:
                release_subreaper()
                self._subreaper = False
            if isinstance(error, (OSError, ValueError)):
                reason = getattr(error, "strerror", None) or str(error)
                raise WatchError(f"cannot run {self.command[0]!r}: {reason}") from None
            raise
        if self.serving is not None:
            self.serving.started()
        self.observer.set_root(
            self._process.pid, self.t0_ns, attached=False, command=self.command or ()
        )
        if self._subreaper and self.observer.tree is not None:
            with self.observer.lock:
                self.observer.tree.adopt_orphans(os.getpid(), own_children)
        assert self.sampler is not None
        self.sampler.begin()
        return self._process.pid

    def _start_sampler(self) -> None:
        paths = tuple(f.path for f in self.files.files)
        self.sampler = Sampler(
            WatchTarget(paths, self.observer, self.memory),
            self.interval_s,
            map_interval_s=self.map_interval_s,
            available=WATCH_SOURCES,
        )
        self.sampler.prepare()
        if self.command is None:
            self.sampler.begin()

    def _stop_sampler(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    def _wait(self, root: int) -> Ending:
        pidfd = None
        with contextlib.suppress(OSError, AttributeError):
            pidfd = os.pidfd_open(root)
        try:
            while True:
                if self._cancel.is_set():
                    return self._ended(root, "cancel")
                ended_by = self.serving.end(self.observer, self.t0_ns) if self.serving else None
                if ended_by is not None:
                    return self._ended(root, ended_by)
                self._say_stopped()
                exited = self._exited(root)
                if exited and not self._leftovers_loading():
                    return self._ended(root, "exit")
                if self._quiet():
                    return self._ended(root, "quiet")
                if pidfd is not None and not exited:  # an exited root's pidfd stays readable
                    wait_readable(pidfd, POLL_S)
                else:
                    self._cancel.wait(POLL_S)
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _say_stopped(self) -> None:
        """Say, once each, the processes of the tree stopped ``STOPPED_SAY_S``."""
        for line in exits.newly_stopped(
            self.observer, self._said_stopped, self.t0_ns, STOPPED_SAY_S
        ):
            self.notes.append(line)
            if self.on_notice is not None:
                self.on_notice(line)

    def _exited(self, root: int) -> bool:
        return exits.root_exited(self._process, self.observer.tree, root)

    def _leftovers(self) -> list[tuple[int, int]]:
        tree = self.observer.tree
        if self._process is None or tree is None:
            return []
        left = leftovers(self.observer, tree.root)
        # A daemon's middle process ending as it is looked at hands its child over after the
        # look: looked at again, a bounded number of times.
        for _ in range(3):
            if left or not tree.orphans_pending():
                break
            left = leftovers(self.observer, tree.root)
        return left

    def _leftovers_loading(self) -> bool:
        """Whether the command's exit does not end the watch yet: processes it left still
        run, and the model still arrives (or has not arrived yet) within ``LEFTOVER_QUIET_S``:
        a launcher that exits once its loader runs has not finished loading."""
        if not self._leftovers():
            return False
        now = now_ns()
        if self._exit_seen_ns is None:
            self._exit_seen_ns = now
        # Quiet since the last arrival, or since the exit when none came after it.
        quiet = min(self.observer.quiet_for_ns(now) or now, now - self._exit_seen_ns)
        return quiet < LEFTOVER_QUIET_S * 1e9

    def _quiet(self) -> bool:
        if self.quiet_s is None:
            return False
        if not self.attached and not self.observer.model_seen():
            return False
        return self.observer.quiet_for_ns(now_ns()) >= self.quiet_s * 1e9

    def _ended(self, root: int, ended_by: str) -> Ending:
        exit_ns = now_ns() if ended_by == "exit" else None
        self.observer.ended = True
        how = None
        if self._process is not None:
            how = self._stop_command(root)  # on exit: what the command left running
            if ended_by != "exit":
                exit_ns = now_ns()
        status = exits.ending_status(ended_by, self.attached)
        if how and self._exited(root):  # else the reaping says what became of it
            self.notes.append(
                f"modelmon stopped the command ({how}): the watch ended by {ended_by}"
            )
        end = exit_ns if exit_ns is not None else now_ns()
        return Ending(status, ended_by, None, None, end - self.t0_ns, end)

    def _stop_command(self, root: int) -> str | None:
        """Stop the command we started and what it left running; how, when it still ran."""
        if self._process is None:
            return None
        how, note = stop_started(self.observer, root, lambda: self._exited(root))
        if note:
            self.notes.append(note)
        return how

    def _finish(self, root: int) -> None:
        """The final look (the root still readable as a zombie), then the reaping."""
        self.observer.mapped_reads.stop()
        self._stop_sampler()
        end = now_ns()
        self.observer.tick(end, final=True)
        if self._process is not None:
            note = end_and_reap(self.observer, self._process, root, end)
            if note:
                self.notes.append(note)

    def _notes(self) -> list[str]:
        notes = self.notes + self.memory.notes
        if self.serving is not None:
            notes += self.serving.notes
        left = exits.still_running_note(self.observer.tree)
        if left is not None:
            notes.append(left)
        return notes

    def exit_status(self) -> tuple[int | None, str | None]:
        """The command's exit code and the signal that ended it (after ``run``)."""
        return exits.exit_status(self._process)
