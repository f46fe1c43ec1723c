"""modelmon's engine, Qt-free. This root is its face: the verbs, the records they return, the
configurations and the errors — what a library user needs, on one screen.

>>> import modelmon.core as mm
>>> tensors = mm.load("model.safetensors", strategy="sequential", threads=4)
>>> result = mm.measure("model.safetensors", "sequential", workers=2, cache="cold")
>>> rec = mm.recommend(mm.open_model("model.safetensors"), budget_s=60)

- Verbs: ``open_model``, ``load`` (into this process; the tensors come back), ``measure``
  (worker processes; the measurement comes back), ``run_for`` (any configuration as a run),
  ``run_program``, ``RanksRun`` (N ranks on this machine at once), ``watch`` and ``Watch``
  (another program's load, from outside, until it is ready), ``run_ab``,
  ``measure_ceilings``, ``recommend``, ``recommend_ranks``, ``recommend_with_loader``,
  ``recommend_server`` (a server's variants, by its time to ready),
  ``discover_models``, config files (``read_config``, ``apply_config``), test models
  (``write_safetensors_model``, ``write_gguf_model``).
- Records: what the verbs return (``LoadResult``, ``ProgramResult``, ``RanksResult``,
  ``ABResult``, ``Recommendation`` ...) and what those hold (``Model``, ``CacheState``,
  ``StorageFacts``, ``ReadStats`` ...).
- Configurations: ``StrategyConfig`` | ``ProgramConfig`` (``parse_configuration``),
  ``Command``, ``STRATEGIES`` and the loaders' registry ``ENGINES``.
- Errors: every class of ``modelmon.core.errors``, ``ModelmonError`` first (each prints as
  one line).

Beside the root, public modules with faces of their own serve the front ends (the command
line, the app, the fleet, the benchmarks): ``modelmon.core.output`` (words and documents),
``.system`` (the machine and the output guard), ``.storage`` (object storage),
``.measuring`` (the parts of a comparison and a search), ``.model`` (references, the demo,
load plans), ``.runs`` (what drives a run's processes); and the vocabulary every layer shares:
``.errors``, ``.options``, ``.limits``, ``.configuration``. Anything deeper is the engine's
own (import-linter contracts in pyproject.toml keep the front ends off it).

Every name is imported on first use (``modelmon.core.faces``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelmon.core.faces import face

if TYPE_CHECKING:
    from modelmon.core.api import load, measure, storage_references, watch
    from modelmon.core.configuration import (
        Command,
        Configuration,
        ProgramConfig,
        StrategyConfig,
        parse_configuration,
    )
    from modelmon.core.errors import (
        BudgetWarning,
        ConfigError,
        ConfigMismatchWarning,
        DoesNotFitError,
        EmptyModelError,
        EndpointUnreachableError,
        LoadCancelled,
        LoadError,
        ModelFormatError,
        ModelmonError,
        ModelmonWarning,
        ModelReferenceError,
        ObjectChangedError,
        ObjectNotFoundError,
        ObjectURLError,
        OptionsError,
        RangesIgnoredError,
        ReadaheadError,
        ReadaheadSkippedWarning,
        ReferenceSyntaxError,
        StorageAccessError,
        StorageConfigError,
        StorageError,
        StorageServerError,
        StorageThrottledError,
        WatchError,
    )
    from modelmon.core.loaders.registry import ENGINES
    from modelmon.core.loading.config_file import apply_config, read_config
    from modelmon.core.loading.result import LoadResult
    from modelmon.core.loading.strategies import STRATEGIES
    from modelmon.core.measuring.ab import ABResult, Verdict
    from modelmon.core.measuring.ab_run import run_ab
    from modelmon.core.measuring.advice import LoaderRecommendation, recommend_with_loader
    from modelmon.core.measuring.candidate import Candidate
    from modelmon.core.measuring.ceiling_records import Ceiling, Ceilings
    from modelmon.core.measuring.ceilings import measure_ceilings
    from modelmon.core.measuring.ranks import RanksRun
    from modelmon.core.measuring.ranks_ab import RanksAB, RanksSide, run_ranks_ab
    from modelmon.core.measuring.ranks_records import RanksResult
    from modelmon.core.measuring.ranks_search import RanksRecommendation, recommend_ranks
    from modelmon.core.measuring.recommend import Recommendation, recommend
    from modelmon.core.measuring.server_advice import recommend_server
    from modelmon.core.model.discovery import DiscoveredModel, Discovery, discover_models
    from modelmon.core.model.formats import open_model
    from modelmon.core.model.records import Model, ModelFile, TensorExtent
    from modelmon.core.model.synth import write_safetensors_model
    from modelmon.core.model.synth_gguf import write_gguf_model
    from modelmon.core.runs.program import ProgramResult, run_program
    from modelmon.core.runs.start import run_for
    from modelmon.core.storage.facts import ObjectStorage
    from modelmon.core.storage.records import ReadStats
    from modelmon.core.system.cache import CacheState
    from modelmon.core.system.memory import MemoryFacts
    from modelmon.core.system.storage import StorageFacts
    from modelmon.core.watching.cold_start import ColdStart
    from modelmon.core.watching.ready import ReadyCondition
    from modelmon.core.watching.result import WatchResult
    from modelmon.core.watching.watch import Watch

_EXPORTS = (
    # Verbs, and what they return
    ("modelmon.core.api", "load measure watch storage_references"),
    ("modelmon.core.model.formats", "open_model"),
    ("modelmon.core.model.discovery", "discover_models Discovery DiscoveredModel"),
    ("modelmon.core.runs.start", "run_for"),
    ("modelmon.core.runs.program", "run_program ProgramResult"),
    ("modelmon.core.measuring.ranks", "RanksRun"),
    ("modelmon.core.measuring.ranks_records", "RanksResult"),
    ("modelmon.core.measuring.ab_run", "run_ab"),
    ("modelmon.core.measuring.ranks_ab", "run_ranks_ab RanksAB RanksSide"),
    ("modelmon.core.measuring.ab", "ABResult Verdict"),
    ("modelmon.core.measuring.ceilings", "measure_ceilings"),
    ("modelmon.core.measuring.ceiling_records", "Ceilings Ceiling"),
    ("modelmon.core.measuring.recommend", "recommend Recommendation"),
    ("modelmon.core.measuring.candidate", "Candidate"),
    ("modelmon.core.measuring.ranks_search", "recommend_ranks RanksRecommendation"),
    ("modelmon.core.measuring.advice", "recommend_with_loader LoaderRecommendation"),
    ("modelmon.core.measuring.server_advice", "recommend_server"),
    ("modelmon.core.loading.config_file", "apply_config read_config"),
    ("modelmon.core.model.synth", "write_safetensors_model"),
    ("modelmon.core.model.synth_gguf", "write_gguf_model"),
    # Records
    ("modelmon.core.model.records", "Model ModelFile TensorExtent"),
    ("modelmon.core.loading.result", "LoadResult"),
    ("modelmon.core.system.cache", "CacheState"),
    ("modelmon.core.system.storage", "StorageFacts"),
    ("modelmon.core.system.memory", "MemoryFacts"),
    ("modelmon.core.storage.facts", "ObjectStorage"),
    ("modelmon.core.storage.records", "ReadStats"),
    ("modelmon.core.watching.watch", "Watch"),
    ("modelmon.core.watching.result", "WatchResult"),
    ("modelmon.core.watching.ready", "ReadyCondition"),
    ("modelmon.core.watching.cold_start", "ColdStart"),
    # Configurations
    (
        "modelmon.core.configuration",
        "Configuration StrategyConfig ProgramConfig Command parse_configuration",
    ),
    ("modelmon.core.loading.strategies", "STRATEGIES"),
    ("modelmon.core.loaders.registry", "ENGINES"),
    # Errors
    (
        "modelmon.core.errors",
        "ModelmonError ModelFormatError LoadError DoesNotFitError LoadCancelled "
        "OptionsError ConfigError ModelmonWarning ConfigMismatchWarning "
        "ReadaheadSkippedWarning BudgetWarning ModelReferenceError ReferenceSyntaxError "
        "EmptyModelError "
        "ReadaheadError WatchError ObjectURLError StorageError StorageConfigError "
        "StorageAccessError ObjectNotFoundError EndpointUnreachableError "
        "StorageThrottledError StorageServerError ObjectChangedError RangesIgnoredError",
    ),
)
__all__, __getattr__, __dir__ = face("modelmon.core", _EXPORTS, globals())
