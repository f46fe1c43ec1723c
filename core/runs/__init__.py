"""Runs: whatever is measured is a run with one protocol (``start.Run``): modelmon's strategy
in worker processes with its sampler (``session.Session``), or another program watched from
outside and counted by the bytes that arrive (``program.ProgramRun``). ``start.run_for`` makes
the run a configuration calls for; an A/B, recommend, the bench, a fleet node and the app take
runs from it, never two kinds of thing.

Its face is what drives a run's processes, for the front ends that drive them (the app's
jobs, the bench's harness): the runs, their messages and tallies, the strategies' and the
engines' lookups, a fresh child's protocol and how each kind of process is ended."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelmon.core.faces import face

if TYPE_CHECKING:
    from modelmon.core.loaders.engine import Engine
    from modelmon.core.loaders.installed import InstalledKnobs, installed_knobs
    from modelmon.core.loaders.registry import engine_unavailable, get_engine
    from modelmon.core.loading.config_file import FORMAT_VERSION
    from modelmon.core.loading.fresh import FreshResult, run_fresh, stop_child
    from modelmon.core.loading.inproc import in_process
    from modelmon.core.loading.messages import ReadBatch, WorkerDone, WorkerReady
    from modelmon.core.loading.preflight import check_loadable
    from modelmon.core.loading.processes import stop_workers
    from modelmon.core.loading.reads import DescriptorTally
    from modelmon.core.loading.result import BlockTiming, blocks_ready_s, half_blocks_ready_s
    from modelmon.core.loading.runner import LoadRun
    from modelmon.core.loading.strategies import default_strategy, get_strategy
    from modelmon.core.metrics.base import MetricSpec
    from modelmon.core.metrics.read_bins import ReadBins
    from modelmon.core.metrics.series import Sampled
    from modelmon.core.runs.arrivals import NO_ARRIVALS, arrival_blocks, untimed_reason
    from modelmon.core.runs.command_output import last_line
    from modelmon.core.runs.program import ProgramRun
    from modelmon.core.runs.session import Session, SessionResult
    from modelmon.core.runs.start import Run, RunOutcome
    from modelmon.core.runs.warm import warm_each

_EXPORTS = (
    ("modelmon.core.runs.start", "Run RunOutcome"),
    ("modelmon.core.runs.session", "Session SessionResult"),
    ("modelmon.core.runs.program", "ProgramRun"),
    ("modelmon.core.runs.command_output", "last_line"),
    ("modelmon.core.runs.warm", "warm_each"),
    ("modelmon.core.loading.runner", "LoadRun"),
    ("modelmon.core.loading.result", "BlockTiming blocks_ready_s half_blocks_ready_s"),
    ("modelmon.core.runs.arrivals", "arrival_blocks untimed_reason NO_ARRIVALS"),
    ("modelmon.core.loading.strategies", "default_strategy get_strategy"),
    ("modelmon.core.loading.preflight", "check_loadable"),
    ("modelmon.core.loading.inproc", "in_process"),
    ("modelmon.core.loading.messages", "ReadBatch WorkerReady WorkerDone"),
    ("modelmon.core.loading.reads", "DescriptorTally"),
    ("modelmon.core.loading.processes", "stop_workers"),
    ("modelmon.core.loading.fresh", "run_fresh FreshResult stop_child"),
    ("modelmon.core.metrics.base", "MetricSpec"),
    ("modelmon.core.metrics.read_bins", "ReadBins"),
    ("modelmon.core.metrics.series", "Sampled"),
    ("modelmon.core.loaders.registry", "get_engine engine_unavailable"),
    ("modelmon.core.loaders.engine", "Engine"),
    ("modelmon.core.loaders.installed", "installed_knobs InstalledKnobs"),
    ("modelmon.core.loading.config_file", "FORMAT_VERSION"),
)
__all__, __getattr__, __dir__ = face("modelmon.core.runs", _EXPORTS, globals())
