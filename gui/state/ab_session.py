"""The A/Bs of the open model: what one starts from (one cache state for both sides, read from
A's and B's own Cache setting, the one place it is set), each one's session name, the
verdicts they reached, and what the compare bar says of them. Qt-free."""

from __future__ import annotations

from dataclasses import dataclass

from modelmon.core import ABResult
from modelmon.core.errors import OptionsError
from modelmon.core.options import CacheMode, LoadOptions
from modelmon.core.output import stopped_words
from modelmon.gui.state.events import Event


def ab_cache(*sides: LoadOptions, asked: CacheMode | None = None) -> CacheMode:
    """The cache state every run of the A/B starts from: ``asked``, else that of its sides
    (the options of A and B that are modelmon's strategies), which must agree.

    An A/B compares loads from the same verified state; sides that start from different
    states would measure the cache, not the strategies. A program side that loads is timed
    by the bytes that arrive from storage, and a server by its time to ready from any state:
    which one it is, its uncounted first run tells, and the A/B refuses a warm cache then
    for a program that is no server (``core.measuring.ab_run.check_cache``).
    """
    states: set[CacheMode] = {side.cache for side in sides}
    if len(states) > 1 and asked is None:
        a, b = sides[0].cache, sides[1].cache
        raise OptionsError(
            f"A/B needs one cache state for both sides: A is {a!r}, B is {b!r}; "
            "set the same Cache in both configurations"
        )
    return asked or (states.pop() if states else "cold")


class ABHistory:
    """The A/Bs run on the open model: numbered sessions, and every verdict they reached.

    ``result`` is the last A/B's verdict: None while an A/B runs or when the last had none.
    ``completed`` keeps every A/B that ended with a verdict, with its session's name, so a
    later A/B that is cancelled doesn't take the earlier verdict out of the exports.
    """

    def __init__(self) -> None:
        self.result: ABResult | None = None
        self.session: str | None = None  # the name of the running or last A/B
        self.completed: list[tuple[str, ABResult]] = []
        self.started = 0  # A/Bs started on this model: numbers their sessions

    def start(self, clock: str) -> str:
        """A new A/B starts at wall-clock time ``clock``: its session's name."""
        self.result = None  # the export of "the last A/B's winner" must not pick an older one
        self.started += 1
        self.session = f"A/B {self.started} at {clock}"
        return self.session

    def finish(self, ab: ABResult) -> None:
        """The running A/B (or, from ``restore``, an earlier session's) reached a verdict."""
        self.result = ab
        self.completed.append((self.session or "A/B", ab))

    @property
    def verdict(self) -> tuple[str, ABResult] | None:
        """The last A/B that reached a verdict, and its session's name: what File ▸ Export
        A/B winner writes, also after a later A/B that was cancelled or failed."""
        return self.completed[-1] if self.completed else None

    def restore(self, kept: ABResult | None, name: str = "", started: int = 0) -> None:
        """Another model is shown: the verdict kept from its last visit (reached by the A/B
        ``name``), and how many A/Bs were started on it, so the next is numbered after them."""
        self.completed.clear()
        self.started = started
        self.session = name or None
        self.result = None
        if kept is not None:
            self.finish(kept)


DEFAULT_PAIRS = 3
MAX_PAIRS = 50


def left_words(runs: int) -> str:
    """What an A/B without a verdict left in the results, in a few words."""
    if runs == 0:
        return "no run had started"
    return f"its {runs} run{'s stay' if runs != 1 else ' stays'} in the results"


@dataclass(frozen=True, slots=True)
class ABBanner:
    """What the compare bar says about A/B: nothing, a running A/B, the last verdict (which
    is what File ▸ Export A/B winner writes), or why the last A/B has none."""

    kind: str  # "none" | "running" | "verdict" | "failure"
    text: str = ""  # the running or failure line
    ab: ABResult | None = None  # the verdict's A/B


class ABState:
    """The open model's A/Bs, the pairs the next one runs, and the banner; emits changes."""

    def __init__(self) -> None:
        self.history = ABHistory()
        self.pairs = DEFAULT_PAIRS
        self.banner = ABBanner("none")
        self.pairs_done = 0  # of the running A/B: pairs whose B run completed
        self.pairs_asked = 0  # of the running A/B
        self.runs_ended = 0  # of the running A/B: its runs in the results, however they ended
        self.changed = Event()  # ABBanner
        self.pairs_changed = Event()  # int

    @property
    def result(self) -> ABResult | None:
        """The last A/B's verdict: None while one runs, or when the last had none."""
        return self.history.result

    def set_pairs(self, pairs: int) -> None:
        pairs = max(1, min(MAX_PAIRS, int(pairs)))
        if pairs != self.pairs:
            self.pairs = pairs
            self.pairs_changed.emit(pairs)

    def _show(self, banner: ABBanner) -> None:
        self.banner = banner
        self.changed.emit(banner)

    def start(self, clock: str, pairs: int) -> str:
        """An A/B of ``pairs`` pairs starts at ``clock``: its session's name."""
        session = self.history.start(clock)
        self.pairs_done, self.pairs_asked, self.runs_ended = 0, pairs, 0
        self._show(ABBanner("running", f"A/B × {pairs} running…"))
        return session

    def pair_done(self, pair: int) -> None:
        self.pairs_done = pair + 1

    def run_ended(self) -> None:
        """A run of the running A/B ended (finished, failed or cancelled): it is a row."""
        self.runs_ended += 1

    def finish(self, ab: ABResult) -> None:
        self.history.finish(ab)
        self._show(ABBanner("verdict", ab=ab))

    def stopped(self, cancelled: bool) -> None:
        """The running A/B ended without a verdict (cancelled, or a run failed), and what it
        left: every run it started is a row of the results (the one the stop cut short
        marked so), counted in no verdict; stopped before its first run, it left none."""
        words = stopped_words(cancelled, self.pairs_done, self.pairs_asked)
        self._show(ABBanner("failure", f"{words} · {left_words(self.runs_ended)}"))

    def other_job_started(self) -> None:
        """Another job starts: a failure's words go; the last verdict stays, as the export
        of the winner it names stays possible."""
        if self.banner.kind == "failure":
            self._show(ABBanner("none"))

    def restore(self, kept: ABResult | None, name: str = "", started: int = 0) -> None:
        """Another model is open: its verdict kept from its last visit (of the A/B ``name``),
        or none, and the count of A/Bs started on it."""
        self.history.restore(kept, name, started)
        self._show(ABBanner("verdict", ab=kept) if kept is not None else ABBanner("none"))
