"""One line a user pastes to load the model their way, with what stands behind it: the
candidate measured here that does what it does (its MB/s), or not measured here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.model.records import Model
from modelmon.core.output.paste import pasteable
from modelmon.core.units import rate_text


@dataclass(frozen=True, slots=True)
class Snippet:
    tool: str
    text: str  # pasted as it is: the model's path in, no remarks (``output.paste``)
    measured_as: str | None  # the spec of the measured candidate that stands for it
    mbps: float | None
    runs: int | None = None  # the runs its MB/s is the median of, where said
    note: str = ""  # how it relates to what was measured ("the same loader", "translated...")
    aside: str = ""  # what the line leaves unsaid ("mmap, the default")

    def evidence(self) -> str:
        """What stands behind the line: measured here (as what, at what rate), or not."""
        about = f"{self.aside}; " if self.aside else ""
        note = f"; {self.note}" if self.note else ""
        if self.measured_as is None:
            return f"{about}not measured here{': ' + self.note if self.note else ''}"
        runs = f", {self.runs} run{'s' if self.runs != 1 else ''}" if self.runs else ""
        rate = rate_text(self.mbps) if self.mbps is not None else "its rate not kept"
        return f"{about}measured here as {self.measured_as}: {rate}{runs}{note}"

    def line(self) -> str:
        """The line and its evidence, as a shell or Python comment beside it."""
        return f"{self.text}   # {self.evidence()}"

    @classmethod
    def of(
        cls,
        tool: str,
        template: str,
        model: Model,
        stand_in: Candidate | None,
        *,
        runs: bool = False,
        note: str = "",
        filled: bool = False,
    ) -> Snippet:
        """A snippet from a loader's line (``PATH`` where the model goes), measured as
        ``stand_in`` (None: not measured here); ``runs``: say how many runs; ``filled``: the
        line names the model already (a folder named ``PATH`` in it stays as it is)."""
        ready = pasteable(template, model, fill=not filled)
        if stand_in is None:
            return cls(tool, ready.code, None, None, None, note, ready.aside)
        count = len(stand_in.results) if runs else None
        return cls(tool, ready.code, stand_in.spec, stand_in.median_mbps, count, note, ready.aside)


def stand_in(pool: tuple[Candidate, ...], test: Callable[[Candidate], bool]) -> Candidate | None:
    """The fastest measured candidate of ``pool`` that passes ``test``, or None."""
    found = [c for c in pool if c.results and test(c)]
    return max(found, key=lambda c: c.median_mbps) if found else None
