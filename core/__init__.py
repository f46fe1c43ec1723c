"""modelmon's engine, Qt-free. This root is its public face: the command line, the app, the
fleet and the benchmarks import every name they use from here, or from the three modules of
the vocabulary every layer shares: ``modelmon.core.errors`` (what can go wrong, typed),
``modelmon.core.options`` (what a load may be asked for) and ``modelmon.core.limits`` (the
ranges of what a search, an A/B or a sampler may be asked for).

>>> from modelmon.core import load
>>> tensors = load("model.safetensors", strategy="sequential", threads=4)

The names, by purpose (``_EXPORTS`` below lists each group's names and where they live):

- Load and measure: ``load`` (into this process; the tensors come back), ``measure`` (worker
  processes; only the measurement comes back), ``run_for`` (any configuration as a ``Run``:
  a ``Session`` of modelmon's strategies, or a ``ProgramRun`` of a command or an engine),
  ``RanksRun`` (N loaders on this machine at once), and the messages a run reports.
- What a load produced: ``LoadResult``, ``ProgramResult``, the page cache around it
  (``CacheState``), the free memory primed for it (``Primed``).
- Compare and choose: ``run_ab`` and its ``Verdict``, ``measure_ceilings``, ``recommend`` and
  its ``Recommendation`` of ``Candidate`` s, ``recommend_with_loader`` for the user's loader.
- Configurations: ``StrategyConfig`` | ``ProgramConfig`` (``parse_configuration``),
  ``Command``, the loaders' registry (``ENGINES``), config files (``apply_config``).
- Models: ``open_model`` and its records, where models live (``discover_models``, ``hf:`` and
  ``ollama:`` references), the demo and synthetic models; ``s3://`` and ``https://`` objects.
- Watch another program load: ``watch`` / ``Watch``, ``storage_references``; a server's
  cold start until it is ready (``ReadyCondition``, ``ColdStart``).
- The machine: storage and memory facts, the page cache, readahead, host memory.
- The output guard: ``check_output`` / ``write_or_keep``, which every file modelmon writes passes.
- Words and documents: strict JSON, text reports, verdicts, explanations, snippets.

A name is here because a front end imports it, or because a library user needs it beside
them (a verb, or the type of what a verb returns); ``tests/core/test_api.py`` holds the root
to that. Process plumbing, search tuning and records of internals stay in their layers.

Every name is imported on first use (PEP 562 ``__getattr__``), not with the package: the
engine's modules bring numpy, the format libraries and ctypes, and ``modelmon --version``, or
a CLI parser that needs only the option ranges, must not pay for them. Type checkers and
IDEs read the ``TYPE_CHECKING`` imports below (sorted by module), so every name has its real
type; ``tests/core/test_api.py`` holds them and ``_EXPORTS`` (grouped by purpose) to the same
names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modelmon.core.api import load, measure, storage_references, watch
    from modelmon.core.configuration import (
        ENGINE,
        Command,
        Configuration,
        ProgramConfig,
        StrategyConfig,
        named_path,
        parse_configuration,
        parse_engine,
        parse_program,
        program_kind,
    )
    from modelmon.core.loaders.engine import Engine
    from modelmon.core.loaders.installed import InstalledKnobs, installed_knobs
    from modelmon.core.loaders.registry import ENGINES, engine_unavailable, get_engine
    from modelmon.core.loading.config_file import FORMAT_VERSION, apply_config, read_config
    from modelmon.core.loading.fresh import FreshResult, run_fresh, stop_child
    from modelmon.core.loading.inproc import in_process
    from modelmon.core.loading.messages import ReadBatch, WorkerDone, WorkerReady
    from modelmon.core.loading.preflight import check_loadable
    from modelmon.core.loading.processes import stop_workers
    from modelmon.core.loading.reads import DescriptorTally
    from modelmon.core.loading.result import BlockTiming, LoadResult
    from modelmon.core.loading.runner import LoadRun
    from modelmon.core.loading.strategies import STRATEGIES, default_strategy, get_strategy
    from modelmon.core.measuring.ab import ABFailed, ABResult, SideSummary, Verdict, judge
    from modelmon.core.measuring.ab_run import run_ab
    from modelmon.core.measuring.advice import (
        LoaderAdvice,
        LoaderRecommendation,
        loader_config,
        recommend_with_loader,
    )
    from modelmon.core.measuring.candidate import Candidate, median_error
    from modelmon.core.measuring.ceiling_records import (
        CEILINGS,
        Ceiling,
        Ceilings,
        allowed_ratio,
        beyond_spread,
        keeps_bytes,
    )
    from modelmon.core.measuring.ceilings import measure_ceilings
    from modelmon.core.measuring.object_bounds import ObjectReading, plain_read
    from modelmon.core.measuring.ranks import RanksRun
    from modelmon.core.measuring.ranks_records import RanksResult, find_straggler
    from modelmon.core.measuring.ranks_search import (
        RanksRecommendation,
        WayMeasured,
        recommend_ranks,
    )
    from modelmon.core.measuring.recommend import BudgetUse, Recommendation, candidates, recommend
    from modelmon.core.metrics.base import MetricSpec
    from modelmon.core.model.demo import RECIPE as DEMO_RECIPE
    from modelmon.core.model.demo import demo_models
    from modelmon.core.model.discovery import (
        DiscoveredModel,
        Discovery,
        discover_models,
        nothing_found,
    )
    from modelmon.core.model.formats import open_model, require_tensor_bytes
    from modelmon.core.model.plan import coalesce, partition
    from modelmon.core.model.records import Model, ModelFile, TensorExtent
    from modelmon.core.model.references import HF_SCHEME, HF_SYNTAX, OLLAMA_SCHEME, OLLAMA_SYNTAX
    from modelmon.core.model.synth import encode_safetensors_header, write_safetensors_model
    from modelmon.core.model.synth_gguf import write_gguf_model
    from modelmon.core.output.answer import Answer, answer, answered, as_told
    from modelmon.core.output.comparison import pick_speedup, shared_fd_caveat, times_text
    from modelmon.core.output.config import build_document, recommendation_document, write_config
    from modelmon.core.output.config import render as render_config
    from modelmon.core.output.explain import explain
    from modelmon.core.output.json import SCHEMA_VERSION, dumps
    from modelmon.core.output.loader import in_loader_rounds, loader_snippets
    from modelmon.core.output.ranks_answer import render_ranks_answer, render_ranks_config
    from modelmon.core.output.snippets import snippets
    from modelmon.core.output.text import (
        memory_text,
        model_summary,
        render_inspect,
        render_ranks,
        render_result,
        search_memory_text,
    )
    from modelmon.core.output.verdict import spread_words, stopped_words, verdict_words
    from modelmon.core.output.watch import render_watch
    from modelmon.core.runs.command_output import last_line
    from modelmon.core.runs.program import ProgramResult, ProgramRun, run_program
    from modelmon.core.runs.session import Session, SessionResult
    from modelmon.core.runs.start import Run, RunOutcome, run_for
    from modelmon.core.runs.warm import warm_each
    from modelmon.core.storage.facts import ObjectFacts, ObjectStorage, object_storage
    from modelmon.core.storage.listing import list_objects
    from modelmon.core.storage.objects import object_endpoint
    from modelmon.core.storage.policy import storage_timeout
    from modelmon.core.storage.records import ReadStats
    from modelmon.core.storage.urls import ObjectURL, is_object_url, parse_object_url
    from modelmon.core.storage.waits import notice_waits as notice_storage_waits
    from modelmon.core.system.cache import CacheState, evict, rest_storage
    from modelmon.core.system.cache import not_measured as cache_not_measured
    from modelmon.core.system.cache import prepare as prepare_cache
    from modelmon.core.system.host_memory import (
        FREE_WORTH_NOTING,
        RETURNS_FREE_MEMORY,
        Primed,
        prime_mode,
        primed_text,
        priming_plan_text,
        set_prime_mode,
    )
    from modelmon.core.system.memory import (
        MemoryFacts,
        check_memory_limit,
        max_memory_limit,
        memory_facts,
        memory_limit_range,
        swap_warning,
    )
    from modelmon.core.system.memory_cgroup import limit_unavailable as memory_limit_unavailable
    from modelmon.core.system.memory_limit import MemoryLimit, ram_text
    from modelmon.core.system.memory_limit import size_text as limit_text
    from modelmon.core.system.memory_limit import ways_under as memory_limit_ways
    from modelmon.core.system.outputs import Output, Saved, check_output, free_name, write_or_keep
    from modelmon.core.system.proc_status import own_status_bytes
    from modelmon.core.system.readahead import locate as locate_readahead
    from modelmon.core.system.readahead import recover as recover_readahead
    from modelmon.core.system.readahead import unavailable as readahead_unavailable
    from modelmon.core.system.residency import residency_of
    from modelmon.core.system.storage import StorageFacts, storage_by_folder, storage_facts
    from modelmon.core.units import human_bytes, rate_span_text, rate_text
    from modelmon.core.watching.cold_start import ColdStart
    from modelmon.core.watching.ready import ReadyCondition
    from modelmon.core.watching.result import Reference, WatchResult
    from modelmon.core.watching.watch import Watch


# Where each name lives, for ``__getattr__``, by purpose: "name" is the module's own,
# "name=attribute" a module's ``attribute`` under the root's clearer name.
_EXPORTS = (
    # Load and measure
    ("modelmon.core.api", "load measure"),
    ("modelmon.core.loading.runner", "LoadRun"),
    ("modelmon.core.runs.session", "Session SessionResult"),
    ("modelmon.core.runs.start", "run_for Run RunOutcome"),
    ("modelmon.core.measuring.ranks", "RanksRun"),
    ("modelmon.core.measuring.ranks_search", "recommend_ranks RanksRecommendation WayMeasured"),
    ("modelmon.core.output.ranks_answer", "render_ranks_answer render_ranks_config"),
    ("modelmon.core.measuring.ranks_records", "RanksResult find_straggler"),
    ("modelmon.core.loading.strategies", "STRATEGIES default_strategy get_strategy"),
    ("modelmon.core.loading.inproc", "in_process"),
    ("modelmon.core.loading.preflight", "check_loadable"),
    ("modelmon.core.loading.messages", "ReadBatch WorkerReady WorkerDone"),
    ("modelmon.core.loading.reads", "DescriptorTally"),
    ("modelmon.core.loading.processes", "stop_workers"),
    ("modelmon.core.metrics.base", "MetricSpec"),
    # What a load produced
    (
        "modelmon.core.loading.result",
        "LoadResult BlockTiming",
    ),
    ("modelmon.core.system.cache", "CacheState"),
    # Compare and choose: A/B, ceilings, recommend, the peer loaders
    ("modelmon.core.measuring.ab", "ABResult ABFailed Verdict SideSummary judge"),
    ("modelmon.core.measuring.ab_run", "run_ab"),
    (
        "modelmon.core.measuring.ceiling_records",
        "Ceilings Ceiling CEILINGS keeps_bytes allowed_ratio beyond_spread",
    ),
    ("modelmon.core.measuring.ceilings", "measure_ceilings"),
    ("modelmon.core.measuring.object_bounds", "plain_read ObjectReading"),
    ("modelmon.core.measuring.recommend", "recommend Recommendation BudgetUse candidates"),
    ("modelmon.core.measuring.candidate", "Candidate median_error"),
    (
        "modelmon.core.measuring.advice",
        "recommend_with_loader LoaderRecommendation LoaderAdvice loader_config",
    ),
    # A load in a fresh process, timed by its child (peers and the benchmarks' core.load)
    ("modelmon.core.loading.fresh", "run_fresh FreshResult stop_child"),
    # Configurations and config files; other programs as configurations (cmd:, engine:)
    (
        "modelmon.core.configuration",
        "Configuration StrategyConfig ProgramConfig Command parse_configuration parse_program "
        "parse_engine named_path program_kind ENGINE",
    ),
    (
        "modelmon.core.loaders.registry",
        "ENGINES get_engine engine_unavailable",
    ),
    (
        "modelmon.core.loaders.engine",
        "Engine",
    ),
    ("modelmon.core.loaders.installed", "installed_knobs InstalledKnobs"),
    ("modelmon.core.runs.program", "ProgramRun ProgramResult run_program"),
    ("modelmon.core.runs.command_output", "last_line"),
    ("modelmon.core.runs.warm", "warm_each"),
    ("modelmon.core.loading.config_file", "apply_config read_config FORMAT_VERSION"),
    (
        "modelmon.core.output.config",
        "build_document recommendation_document render_config=render write_config",
    ),
    # Models: open, inspect, find, make up
    ("modelmon.core.model.formats", "open_model require_tensor_bytes"),
    ("modelmon.core.model.records", "Model ModelFile TensorExtent"),
    ("modelmon.core.model.plan", "partition coalesce"),
    ("modelmon.core.model.discovery", "discover_models Discovery DiscoveredModel nothing_found"),
    ("modelmon.core.model.references", "HF_SCHEME HF_SYNTAX OLLAMA_SCHEME OLLAMA_SYNTAX"),
    ("modelmon.core.model.demo", "demo_models DEMO_RECIPE=RECIPE"),
    ("modelmon.core.model.synth", "write_safetensors_model encode_safetensors_header"),
    ("modelmon.core.model.synth_gguf", "write_gguf_model"),
    # Watch another program load its model
    ("modelmon.core.api", "watch storage_references"),
    ("modelmon.core.watching.watch", "Watch"),
    ("modelmon.core.watching.result", "WatchResult Reference"),
    ("modelmon.core.watching.ready", "ReadyCondition"),
    ("modelmon.core.watching.cold_start", "ColdStart"),
    # The machine: storage, memory, page cache, readahead, host memory, this process
    ("modelmon.core.system.storage", "storage_facts StorageFacts storage_by_folder"),
    (
        "modelmon.core.system.memory",
        "memory_facts MemoryFacts swap_warning check_memory_limit memory_limit_range "
        "max_memory_limit",
    ),
    ("modelmon.core.system.memory_cgroup", "memory_limit_unavailable=limit_unavailable"),
    (
        "modelmon.core.system.memory_limit",
        "MemoryLimit memory_limit_ways=ways_under ram_text limit_text=size_text",
    ),
    (
        "modelmon.core.system.cache",
        "prepare_cache=prepare cache_not_measured=not_measured rest_storage evict",
    ),
    (
        "modelmon.core.system.readahead",
        "locate_readahead=locate readahead_unavailable=unavailable recover_readahead=recover",
    ),
    (
        "modelmon.core.system.host_memory",
        "prime_mode set_prime_mode Primed primed_text priming_plan_text RETURNS_FREE_MEMORY "
        "FREE_WORTH_NOTING",
    ),
    ("modelmon.core.system.residency", "residency_of"),
    ("modelmon.core.system.proc_status", "own_status_bytes"),
    # Object storage: s3:// and https:// models (open_model reads their headers)
    ("modelmon.core.storage.urls", "is_object_url parse_object_url ObjectURL"),
    ("modelmon.core.storage.facts", "ObjectFacts ObjectStorage object_storage"),
    ("modelmon.core.storage.listing", "list_objects"),
    ("modelmon.core.storage.objects", "object_endpoint"),
    ("modelmon.core.storage.records", "ReadStats"),
    ("modelmon.core.storage.policy", "storage_timeout"),
    ("modelmon.core.storage.waits", "notice_storage_waits=notice_waits"),
    # The output guard: every file modelmon writes
    ("modelmon.core.system.outputs", "check_output write_or_keep Output Saved free_name"),
    # Words and documents
    ("modelmon.core.output.json", "dumps SCHEMA_VERSION"),
    (
        "modelmon.core.output.text",
        "render_result render_inspect render_ranks model_summary memory_text search_memory_text",
    ),
    ("modelmon.core.output.watch", "render_watch"),
    ("modelmon.core.output.verdict", "verdict_words stopped_words spread_words"),
    ("modelmon.core.output.explain", "explain"),
    ("modelmon.core.output.comparison", "shared_fd_caveat pick_speedup times_text"),
    ("modelmon.core.output.snippets", "snippets"),
    ("modelmon.core.output.answer", "answer answered as_told Answer"),
    ("modelmon.core.output.loader", "loader_snippets in_loader_rounds"),
    ("modelmon.core.units", "human_bytes rate_text rate_span_text"),
)
# name -> (module, attribute)
_WHERE = {
    name: (module, attribute or name)
    for module, names in _EXPORTS
    for name, _, attribute in (word.partition("=") for word in names.split())
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module 'modelmon.core' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # the next access does not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
