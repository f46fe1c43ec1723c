"""The A/Bs of the open model: what one starts from (one cache state for both sides, read from
A's and B's own Cache setting, the one place it is set), each one's session name, and the
verdicts they reached. Qt-free."""

from __future__ import annotations

from modelmon.core import ABResult, LoadOptions, OptionsError


def ab_cache(a: LoadOptions, b: LoadOptions) -> str:
    """The cache state every run of the A/B starts from: A's and B's, which must agree.

    An A/B compares loads from the same verified state; sides that start from different
    states would measure the cache, not the strategies.
    """
    if a.cache != b.cache:
        raise OptionsError(
            f"A/B needs one cache state for both sides: A is {a.cache!r}, B is {b.cache!r}; "
            "set the same Cache in both configurations"
        )
    return a.cache


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

    def restore(self, kept: ABResult | None) -> None:
        """Another model is shown: no A/B of it yet but the verdict kept from its last visit."""
        self.completed.clear()
        self.started = 0
        self.session = None
        self.result = None
        if kept is not None:
            self.finish(kept)
