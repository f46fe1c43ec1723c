"""When a watched server is ready: the moment users stop waiting for its cold start.

Ready is the first of the conditions asked for (``ReadyCondition``):
- ``listen``: a listening TCP socket of the tree, held by the command itself or by a process
  that read the model (a rank), once no model byte arrives after it (``SETTLE_S``). One
  opened before or while the weights are read is not taken: a ``torch.distributed`` store,
  gloo's own sockets and servers that bind before they load (llama.cpp's answers 503 until
  it has loaded) all listen that early; it is noted instead, and such a server is taken as
  ready when it goes quiet after its weights. The default, when nothing else is asked;
- ``port``: a listening TCP socket of the tree on that port, whenever it opens;
- ``line``: a line of the command's output (standard output or error) matching a regular
  expression: the output then passes through pipes this module reads and forwards;
- ``url``: an http(s) URL answering 2xx (``/health``, ``/v1/models``), asked every
  ``URL_PERIOD_S``.

Each is seen from outside and timed where it is seen: a socket between two looks (its time is
the middle of the two), a line when it is read, a URL when its answer arrives.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import regex

from modelmon.core.errors import OptionsError, printable, redact_url
from modelmon.core.loading.reads import now_ns
from modelmon.core.system.sockets import listening_sockets, socket_inodes
from modelmon.core.watching.output_tap import compile_ready

LISTEN_PERIOD_S = 0.1  # between looks for listening sockets
URL_PERIOD_S = 0.2  # between requests of a ready URL
URL_TIMEOUT_S = 2.0  # of one request
FOREIGN_AFTER_S = 2.0  # a new listening socket no process of the tree holds, looked at again
READY_BY = ("listen", "port", "line", "url")
BEFORE_WEIGHTS = "before its weights were read"
NOT_A_RANK = "by a process that is neither the command nor one that read the model"
# How finely each way of seeing ready times it: a socket is placed between two looks (half
# their period either way), a URL answers within its period, a line is timed when read.
RESOLUTION_S = {
    "listen": LISTEN_PERIOD_S / 2,
    "port": LISTEN_PERIOD_S / 2,
    "url": URL_PERIOD_S,
    "line": 0.0,
}


def resolution_s(by: str | None) -> float:
    """How finely a ready seen ``by`` one of ``READY_BY`` is timed (0 for none)."""
    return RESOLUTION_S.get(by or "", 0.0)


# A listening socket is ready once this long has passed with no model byte after it.
SETTLE_S = 1.0
# A server that listened before its weights and was then this quiet is taken as ready then.
EARLY_QUIET_S = 3.0


@dataclass(frozen=True, slots=True)
class ReadyCondition:
    """What makes a watched command ready (see the module's docstring)."""

    port: int | None = None
    line: str | None = None  # a regular expression (Python's ``re``), searched in each line
    url: str | None = None

    @property
    def listen(self) -> bool:
        """Any listening socket (of the command or a rank) is ready: nothing else was asked."""
        return self.port is None and self.line is None and self.url is None

    @property
    def asked(self) -> bool:
        """The user named a condition: a command never ready is then a failure."""
        return not self.listen

    def check(self) -> None:
        """OptionsError, in one line, for a condition that cannot be watched for."""
        if self.port is not None and not 1 <= self.port <= 65535:
            raise OptionsError(f"--ready-port must be a TCP port, 1 to 65535, not {self.port}")
        if self.line is not None:
            if not self.line:
                raise OptionsError("--ready-line is empty: give a regular expression")
            try:
                re.compile(self.line)  # Python's syntax, as --help promises (no match is run)
                compile_ready(self.line)
            except (re.error, regex.error) as exc:
                raise OptionsError(f"--ready-line is not a regular expression: {exc}") from None
            except RecursionError:  # the parser recurses once a level of nesting
                raise OptionsError(
                    "--ready-line is nested too deeply to be compiled: simplify its groups"
                ) from None
        if self.url is not None:
            check_ready_url(self.url)


def shown_url(url: str) -> str:
    """A ready URL as it may be written: the one redaction every URL passes (a health URL
    may carry a token), on one line."""
    return printable(redact_url(url))


def check_ready_url(url: str) -> None:
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # an unclosed IPv6 bracket, say
        raise OptionsError(f"--ready-url {shown_url(url)}: not a URL") from None
    if parts.scheme not in ("http", "https"):
        raise OptionsError(f"--ready-url {shown_url(url)}: not an http:// or https:// URL")
    try:
        port = parts.port
    except ValueError:
        raise OptionsError(f"--ready-url {shown_url(url)}: its port is not a TCP port") from None
    if not parts.hostname:
        raise OptionsError(f"--ready-url {shown_url(url)}: names no host")
    if port == 0:
        raise OptionsError(f"--ready-url {shown_url(url)}: its port is not a TCP port")
    if any(ord(char) < 0x21 for char in url):
        raise OptionsError(f"--ready-url {shown_url(url)}: holds spaces or control characters")
    from urllib3.exceptions import LocationParseError
    from urllib3.util import parse_url

    try:  # what asks it: a host urlsplit passes ("[v1.x]") may be no host urllib3 can reach
        parse_url(url)
    except LocationParseError:
        raise OptionsError(f"--ready-url {shown_url(url)}: not a URL (its host)") from None


@dataclass(frozen=True, slots=True)
class ReadySeen:
    """The moment the command was seen ready, and how."""

    at_ns: int
    by: str  # one of READY_BY
    detail: str  # "pid 4242 listened on :8000", 'its output said "..."', "URL answered 200"


@dataclass(frozen=True, slots=True)
class EarlyListen:
    """A listening socket opened before the first model byte (or by a process that is neither
    the command nor a rank): seen, not taken as ready."""

    at_ns: int  # midway between the look before and the look that saw it (no later)
    port: int
    pid: int
    why: str
    seen_ns: int  # the look that saw it: it listened by then


class ReadyWatch:
    """Looks for the ready conditions while a watch runs. ``look`` is called from the watch's
    loop (the listening sockets), the tap's and the URL's threads report on their own;
    ``seen`` is the first of them."""

    def __init__(self, condition: ReadyCondition) -> None:
        condition.check()
        self.condition = condition
        self.seen: ReadySeen | None = None
        self.early: list[EarlyListen] = []
        self.url_failure: str | None = None  # the last reason the ready URL did not answer
        self._lock = threading.Lock()
        self._known: set[int] = set()  # listening inodes already placed
        # New listening inodes not placed yet: when first seen (midway, and the look).
        self._pending: dict[int, tuple[int, int]] = {}
        self._candidate: EarlyListen | None = None  # a listen after the first model byte
        # Early listens a model byte arrived after, past the look that saw them: early for good.
        self._settled: list[EarlyListen] = []
        self._last_look_ns: int | None = None
        self._stop = threading.Event()
        self._url_thread: threading.Thread | None = None

    @property
    def watches_sockets(self) -> bool:
        return self.condition.listen or self.condition.port is not None

    def begin(self) -> None:
        """Before the command starts: the sockets already listening are not its own; a ready
        URL that answers already is someone else's server."""
        if self.watches_sockets:
            listening = _listening()
            self._known = set(listening)
            port = self.condition.port
            if port is not None and port in listening.values():
                raise OptionsError(
                    f"--ready-port {port}: another process listens on it already, before the "
                    "command starts: its own would fail to bind, or never be the one seen"
                )
        if self.condition.url is not None:
            answer = _ask(self.condition.url)
            if answer[0]:
                raise OptionsError(
                    f"--ready-url {shown_url(self.condition.url)} answers {answer[1]} before "
                    "the command starts: another server holds it"
                )

    def start_url(self) -> None:
        """Ask the ready URL from now on (the command has started)."""
        if self.condition.url is None:
            return
        self._url_thread = threading.Thread(
            target=self._poll_url, name="modelmon-ready-url", daemon=True
        )
        self._url_thread.start()

    def _mark(self, at_ns: int, by: str, detail: str) -> None:
        with self._lock:
            if self.seen is None:
                self.seen = ReadySeen(at_ns, by, detail)

    def line(self, at_ns: int, text: str) -> None:
        """A line of the command's output matched the ready expression."""
        shown = printable(text.strip())
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        self._mark(at_ns, "line", f'its output said "{shown}"')

    def look(
        self,
        now: int,
        pids: Iterable[int],
        root: int,
        ranks: Callable[[], set[int]],
        model_ns: tuple[int, int, int] | None,
    ) -> None:
        """Look for new listening sockets of the tree (``pids``), at most every
        ``LISTEN_PERIOD_S``. ``ranks``: the pids that read the model; ``model_ns``: when the
        first model byte arrived, and the latest at the earliest and at the latest (None:
        none yet)."""
        if not self.watches_sockets or self.seen is not None:
            return
        self._reconsider(root, ranks, model_ns)
        self._confirm(now, model_ns)
        previous = self._last_look_ns
        if previous is not None and now - previous < LISTEN_PERIOD_S * 1e9:
            return
        self._last_look_ns = now
        listening = _listening()
        new = {inode: port for inode, port in listening.items() if inode not in self._known}
        if not new:
            return
        at = now if previous is None else (previous + now) // 2
        for inode in new:
            self._pending.setdefault(inode, (at, now))
        holders: dict[int, int] = {}
        for pid in pids:
            for inode in socket_inodes(pid) & new.keys():
                holders[inode] = pid
        for inode, port in sorted(new.items(), key=lambda item: item[1]):
            holder = holders.get(inode)
            first, seen = self._pending[inode]
            if holder is None:
                # Not the tree's, or of a process the tree has not found yet: looked at
                # again for a while, then left alone.
                if now - first >= FOREIGN_AFTER_S * 1e9:
                    self._known.add(inode)
                    del self._pending[inode]
                continue
            self._known.add(inode)
            del self._pending[inode]
            self._place(EarlyListen(first, port, holder, "", seen), root, ranks, model_ns)
        for inode in [i for i in self._pending if i not in listening]:
            del self._pending[inode]  # closed before it was placed

    def _place(
        self,
        listen: EarlyListen,
        root: int,
        ranks: Callable[[], set[int]],
        model_ns: tuple[int, int, int] | None,
    ) -> None:
        """A new listening socket of the tree: ready, a candidate for it, or early."""
        detail = f"pid {listen.pid} listened on :{listen.port}"
        if self.condition.port is not None:
            if listen.port == self.condition.port:
                self._mark(listen.at_ns, "port", detail)
            return
        if model_ns is None or listen.at_ns < model_ns[0]:
            self.early.append(replace(listen, why=BEFORE_WEIGHTS))
        elif listen.pid != root and listen.pid not in ranks():
            self.early.append(replace(listen, why=NOT_A_RANK))
        elif self._candidate is None:
            self._candidate = listen  # ready once no model byte arrives after it

    def _reconsider(
        self, root: int, ranks: Callable[[], set[int]], model_ns: tuple[int, int, int] | None
    ) -> None:
        """A listen set aside before a model byte was known to have come before it (a page
        scan places bytes a look later than the socket's look), or as no rank's, by a process
        known since to have read the model (its reads placed later, or a daemon standing for
        its exited command): the candidate now, when a model byte arrived by the look that
        saw it. ``_confirm`` then judges it against the bytes after it."""
        if self._candidate is not None or self.condition.port is not None or model_ns is None:
            return
        others = [e for e in self.early if e not in self._settled and e.seen_ns >= model_ns[0]]
        if not others:
            return
        readers = ranks()
        for listen in others:
            if listen.pid == root or listen.pid in readers:
                self.early.remove(listen)
                self._candidate = replace(listen, why="")
                return

    def _confirm(self, now: int, model_ns: tuple[int, int, int] | None) -> None:
        """The candidate is ready once the weights have stopped arriving before it (for
        ``SETTLE_S``); a model byte that arrived after the look that saw it makes it one of
        the early ones. One that arrived between that look and the one before leaves the
        order open: the socket is taken to have listened after it (as a server listens once
        loaded), placed no earlier than the latest byte could have arrived."""
        candidate = self._candidate
        if candidate is None or model_ns is None:
            return
        if model_ns[1] > candidate.seen_ns:
            early = replace(candidate, why=BEFORE_WEIGHTS)
            self.early.append(early)
            self._settled.append(early)
            self._candidate = None
            return
        latest = min(model_ns[2], candidate.seen_ns)
        if latest > candidate.at_ns:
            candidate = replace(candidate, at_ns=latest)
            self._candidate = candidate
        if now - candidate.at_ns >= SETTLE_S * 1e9:
            detail = f"pid {candidate.pid} listened on :{candidate.port}"
            self._mark(candidate.at_ns, "listen", detail)

    def settle_early(self, quiet_since_ns: int | None, model_seen: bool) -> bool:
        """A server that listened before its weights and went quiet: taken as ready (only for
        the default condition, and once). Without a model byte it is a lazy server, ready
        when it listened; after its weights, when it went quiet (its post-processing done)."""
        if not self.condition.listen or self.seen is not None or quiet_since_ns is None:
            return False
        early = next((e for e in self.early if e.why == BEFORE_WEIGHTS), None)
        if early is None:
            return False
        if not model_seen:
            self._mark(early.at_ns, "listen", f"pid {early.pid} listened on :{early.port}")
        else:
            self._mark(
                max(early.at_ns, quiet_since_ns),
                "listen",
                f"pid {early.pid} listened on :{early.port} before its weights; taken as "
                "ready when it went quiet after them (--ready-url says when it answers)",
            )
        return True

    def _poll_url(self) -> None:
        url = self.condition.url
        assert url is not None
        while not self._stop.is_set() and self.seen is None:
            ok, said = _ask(url)
            if ok:
                self._mark(now_ns(), "url", f"{shown_url(url)} answered {said}")
                return
            self.url_failure = said
            self._stop.wait(URL_PERIOD_S)

    def stop(self) -> None:
        self._stop.set()
        if self._url_thread is not None:
            self._url_thread.join(URL_TIMEOUT_S + 1.0)
            self._url_thread = None


def _listening() -> dict[int, int]:
    """{inode: port} of the listening TCP sockets a process holds; empty where the kernel's
    socket listing cannot be read."""
    try:
        return {s.inode: s.local[1] for s in listening_sockets()}
    except OSError:
        return {}


def _ask(url: str) -> tuple[bool, str]:
    """(2xx, its status) of one GET of ``url``; (False, why) where it did not answer 2xx, in
    words that follow "the ready URL": "answered 500", "gave no answer: ..."."""
    import urllib3

    timeout = urllib3.Timeout(connect=URL_TIMEOUT_S, read=URL_TIMEOUT_S)
    try:
        with urllib3.PoolManager(retries=False, timeout=timeout) as pool:
            response = pool.request("GET", url, redirect=False, preload_content=False)
            status = response.status
            response.release_conn()
    except urllib3.exceptions.NameResolutionError:
        return False, "gave no answer: its host name does not resolve"
    except urllib3.exceptions.NewConnectionError:
        return False, "gave no answer: the connection was refused"
    except urllib3.exceptions.ConnectTimeoutError:
        return False, f"gave no answer: no connection within {URL_TIMEOUT_S:.0f} s"
    except urllib3.exceptions.ReadTimeoutError:
        return False, f"gave no answer within {URL_TIMEOUT_S:.0f} s"
    except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        return False, f"gave no answer: {type(exc).__name__}"
    if 200 <= status < 300:
        return True, str(status)
    return False, f"answered {status}"
