"""What a measurement may be asked for: the ranges checked before anything is measured.

The engine checks its arguments against these figures (a recommendation's budget, RAM and
parallelism, an A/B's pairs, a monitored load's sampling period), and the front ends state
the same ranges: the CLI in ``--help`` and its one-line errors, the app in its dialogs. The
load options' own ranges are ``core.options``'s. Nothing here imports more than those two
modules, so the CLI builds its parser from these figures without loading the engine. A RAM
limit's upper bound is the machine's RAM, so it is checked where that is read
(``system.memory.check_memory_limit``).
"""

from __future__ import annotations

import math

from modelmon.core.errors import OptionsError
from modelmon.core.options import MAX_PARALLEL, MiB

# A recommendation's budget bounds the whole search, from its start to its answer.
DEFAULT_BUDGET_S = 120.0  # enters the grid and settles a pick in pairs on a local disk
# Start-up (~0.5 s), the storage's ceilings (two cold reads of the model) and a first
# complete load take seconds on any but a tiny model: a person asking for less would get a
# search that cannot keep its budget. (The engine takes any positive budget: a caller that
# wants the quickest answer gets the ceilings and one load.)
MIN_BUDGET_S = 5.0
MAX_BUDGET_S = 86_400.0  # a day: past any search worth waiting for, short of a typo's 1e12
# The pick's own runs toward ``EVIDENCE_RUNS`` (``search.fill``), and the user's loader's
# finalists' rounds (``loader_rounds``), may overrun the budget by this share of it: a user
# is better served by a late third run than by a verdict on two, and a budget kept within
# it is kept.
EVIDENCE_OVERRUN = 0.10
EVIDENCE_RUNS = 3  # cold runs a pick rests on: a median of three outvotes one odd run
# The user's loader (recommend --loader/--engine): its finalists run to ``EVIDENCE_RUNS``
# while the overrun holds them, and on to ``LOADER_MAX_ROUNDS`` while one's median is known
# less finely than ``LOADER_MEDIAN_ERROR`` (``measuring.candidate.median_error``), so that the
# figure reported holds when the user runs the loader again (``measuring.loader_rounds``):
# two medians each known to 3 % differ by more than 10 % about two times in a hundred.
LOADER_MAX_ROUNDS = 9
LOADER_MEDIAN_ERROR = 0.03
# Runs compared in rounds (the user's loader, an A/B) start, on network storage, this long
# after this process's last run there ended: a network filesystem's client keeps what a run
# left it for seconds (``system.storage_rest.rest_storage``).
STORAGE_REST_S = 6.0

# The search's widest candidate runs this many times the parallelism it is given, and each
# candidate's workers are bounded by ``MAX_PARALLEL``.
SEARCH_WIDTH = 2
MAX_SEARCH_WORKERS = MAX_PARALLEL // SEARCH_WIDTH

# A RAM limit below a MiB is a slip of the unit (``--memory-limit 512`` is 512 bytes), not a
# machine; above the machine's RAM it would call a model that cannot fit "fitting".
MIN_MEMORY_LIMIT = MiB

MAX_AB_PAIRS = 100  # an A/B of more pairs adds nothing the noise estimate has not settled

# A monitored load's sampling period: every sample reads /proc and the page-cache counters,
# which below 10 ms takes a share of a core from the load being measured.
MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = 60.0


def _figure(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def range_text(low: float, high: float, unit: str = "") -> str:
    """'from 10 to 86400 s': how the ranges read in every message."""
    return f"from {_figure(low)} to {_figure(high)}{f' {unit}' if unit else ''}"


def check_number(name: str, value: object, low: float, high: float, unit: str = "") -> float:
    """``value`` as a float when it is a finite number in [low, high], else an OptionsError
    naming ``name`` and the range."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise OptionsError(f"{name} must be a number {range_text(low, high, unit)}, not {value!r}")
    return float(value)


def check_whole(name: str, value: object, low: int, high: int) -> int:
    """``value`` when it is a whole number in [low, high], else an OptionsError naming
    ``name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise OptionsError(f"{name} must be a whole number {range_text(low, high)}, not {value!r}")
    return value


def check_budget(budget_s: object) -> float:
    """A budget in seconds the engine takes: finite, more than 0, at most ``MAX_BUDGET_S``
    (a person is asked for ``MIN_BUDGET_S`` at least)."""
    seconds = check_number("the budget", budget_s, 0.0, MAX_BUDGET_S, "s")
    if seconds <= 0:
        raise OptionsError(f"the budget must be more than 0 s, not {budget_s!r}")
    return seconds


# How long a read of object storage waits for an endpoint that sends nothing, all its tries
# together, before it fails (``storage.policy``): 30 s is one read timeout, so an endpoint
# that takes connections and never answers fails in half a minute, not after 8 × 30 s; a
# byte arriving starts the wait again. Asked for on the command line (--storage-timeout) or
# in ``MODELMON_STORAGE_TIMEOUT``, which the worker processes inherit.
DEFAULT_STORAGE_TIMEOUT_S = 30.0
MIN_STORAGE_TIMEOUT_S = 1.0
MAX_STORAGE_TIMEOUT_S = 3600.0
STORAGE_TIMEOUT_ENV = "MODELMON_STORAGE_TIMEOUT"

# How long a watched program must be quiet (no page of the model arriving) before the watch
# ends it: shorter than a few samples is a pause between two reads, not a program done loading
# (a 0 s quiet stopped a loader 0.2 s in with 16 % of its model arrived).
MIN_QUIET_S = 1.0
MAX_QUIET_S = 86_400.0

# How long a server may take to be ready once a ready condition (a port, a line, a URL) is
# named and no timeout is: a server cold-starting from a bucket, or compiling, takes
# minutes. The most a timeout may be asked is a day.
DEFAULT_READY_TIMEOUT_S = 900.0
MIN_READY_TIMEOUT_S = 1.0
MAX_READY_TIMEOUT_S = 86_400.0
