"""The config file as a load reads it: its format (every table and key, checked), and
``apply_config``, the one way a config becomes a load's strategy and options (for
``core.load(config=)``, ``core.measure(config=)``, ``modelmon load --config``, the app and the
benchmarks alike). Built by ``output.config``, written by ``output.config_text``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from modelmon.core.configuration import StrategyConfig
from modelmon.core.errors import ConfigError, OptionsError, ReadaheadSkippedWarning, warn
from modelmon.core.loading.identity import IDENTITY_KEYS, validate_identity, warn_if_different
from modelmon.core.model.records import Model
from modelmon.core.options import (
    OPTION_NAMES,
    LoadOptions,
    chunk_from_mib,
    from_mapping,
    parse_size,
)
from modelmon.core.system import readahead
from modelmon.core.system.files import UnusableFile, parse_toml, read_small_file

FORMAT_VERSION = 1
MAX_CONFIG_BYTES = 1 << 20  # a written config is a few kB

Check = Callable[[Any], bool]
_str: Check = lambda v: isinstance(v, str)  # noqa: E731
_bool: Check = lambda v: isinstance(v, bool)  # noqa: E731
_count: Check = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
_number: Check = lambda v: isinstance(v, int | float) and not isinstance(v, bool)  # noqa: E731
_strings: Check = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731
_numbers: Check = lambda v: isinstance(v, list) and all(_number(x) for x in v)  # noqa: E731

# section -> {key: (check, what it must be)}; "*" means any key with that check.
# [recommendation]: the overall pick, which may be a peer loader that beat modelmon's best
# ([recommended] still holds modelmon's best, so the file stays applicable to core.load).
RECOMMENDATION_KEYS: dict[str, tuple[Check, str]] = {
    "pick": (_str, "a spec"),
    "loader": (_str, "modelmon or a peer loader's name"),
    "median_mbps": (_number, "MB/s"),
    "runs": (_count, "a run count"),
    "in_config": (_bool, "true or false"),
    "apply": (_str, "an [apply] key"),
}
# [loader]: the user's loader measured beside modelmon (recommend --loader / --engine): as it
# is, the change picked and its gain over its baseline, modelmon's best in the same rounds.
LOADER_KEYS: dict[str, tuple[Check, str]] = {
    **{
        f"{entry}_{key}": check
        for entry in ("as_is", "change", "modelmon")
        for key, check in (
            ("mbps", (_number, "MB/s")),
            ("runs", (_count, "a run count")),
            ("run_mbps", (_numbers, "each run's MB/s")),
            ("ended", (_str, "how it ended")),
        )
    },
    "as_is": (_str, "a spec"),
    "change": (_str, "a spec"),
    "modelmon": (_str, "a spec"),
    "baseline": (_str, "a spec"),
    "gain": (_number, "a ratio"),
    "engine": (_str, "an engine's name"),
    "engine_found": (_str, "how the engine was known"),
    "for_engine": (_str, "an engine's name"),
    "rounds": (_count, "a round count"),
}
# [ranks]: a ranks recommendation (recommend --ranks N): the mode picked, the node's memory.
RANKS_KEYS: dict[str, tuple[Check, str]] = {
    "ranks": (_count, "a rank count"),
    "fits": (_bool, "true or false"),
    "mode": (lambda v: v in ("whole", "slice", "one-reader"), "whole, slice or one-reader"),
    "memory_limit_bytes": (_count, "a byte count"),
    "slowest_rank_seconds": (_number, "seconds"),
    "runs": (_count, "a run count"),
    "node_peak_bytes": (_count, "a byte count"),
    "node_held_bytes": (_count, "a byte count"),
    "holds_at_bytes": (_count, "a byte count"),
    "holds_verified": (_bool, "true or false"),
    "least_needed_bytes": (_count, "a byte count"),
}
SCHEMA: dict[str, dict[str, tuple[Check, str]]] = {
    "model": {
        "path": (_str, "a path"),
        "bytes": (_count, "a byte count"),
        "format": (lambda v: v in ("safetensors", "gguf"), "safetensors or gguf"),
        "files": (_count, "a file count"),
        "fingerprint": (_str, "a hex digest"),
    },
    "machine": {
        "ram_bytes": (_count, "a byte count"),
        "usable_ram_bytes": (_count, "a byte count"),
        "memory_limit_bytes": (_count, "a byte count"),
        "cpus": (_count, "a count"),
        "fs_type": (_str, "a filesystem type"),
        "device": (_str, "a device name"),
        "rotational": (_bool, "true or false"),
        "read_ahead_kb": (_count, "KiB"),
        "network": (_bool, "true or false"),
        "fuse": (_bool, "true or false"),
        "kernel": (_str, "a kernel release"),
        "object_storage": (
            lambda v: isinstance(v, dict) and all(isinstance(x, str | None) for x in v.values()),
            "a table of the bucket's storage, endpoint, region, host kind and ranges",
        ),
    },
    "evidence": {
        "runs": (_count, "a run count"),
        "cache": (_str, "cold, warm, or the state runs that could not be made cold started from"),
        "median_mbps": (_number, "MB/s"),
        "min_mbps": (_number, "MB/s"),
        "max_mbps": (_number, "MB/s"),
        "median_seconds": (_number, "seconds"),
        "all_runs_verified": (_bool, "true or false"),
        "fraction_of_ceiling": (_number, "a fraction"),
        "ceiling": (_str, "a ceiling name"),
        "budget_seconds": (_number, "seconds"),
        "peak_rss_bytes": (_count, "a byte count"),
        "process_tree_peak_rss_bytes": (_count, "a byte count"),
        "above_bound": (_bool, "true or false"),
        "bound": (lambda v: isinstance(v, dict), "a table"),
        "memory_limit": (
            lambda v: (
                isinstance(v, dict)
                and _count(v.get("limit_bytes"))
                and isinstance(v.get("probes", []), list)
            ),
            "a table: the memory limit given and the pick's runs under smaller ones",
        ),
        "ceilings_mbps": (
            lambda v: isinstance(v, dict) and all(_number(x) for x in v.values()),
            "MB/s by name",
        ),
    },
    "apply": {"*": (_str, "a snippet")},
    "apply_evidence": {"*": (_str, "a sentence")},
    # Why a loader people use has no line in [apply] ("servers": vLLM's and SGLang's).
    "apply_left_out": {"*": (_str, "a sentence")},
    "recommendation": RECOMMENDATION_KEYS,
    "identity": IDENTITY_KEYS,
    "loader": LOADER_KEYS,
    "ranks": RANKS_KEYS,
    # [fit]: the weights outgrow the RAM allowed: no [recommended], what a load needs.
    "fit": {
        "fits": (_bool, "true or false"),
        "needs_bytes": (_count, "a byte count"),
        "allowed_bytes": (_count, "a byte count"),
        "storage_mbps": (_number, "MB/s"),
    },
}
ALTERNATIVE_KEYS: dict[str, tuple[Check, str]] = {
    "rank": (_count, "a rank"),
    "strategy": (_str, "a strategy"),
    "spec": (_str, "a spec"),
    "median_mbps": (_number, "MB/s"),
    "runs": (_count, "a run count"),
    "note": (_str, "a sentence"),
}
TOP_KEYS = {
    "format_version",
    "model",
    "machine",
    "recommended",
    "evidence",
    "alternatives",
    "apply",
    "apply_evidence",
    "apply_left_out",
    "explanation",
    "identity",
    "recommendation",
    "loader",
    "ranks",
    "fit",
}


@dataclass(frozen=True, slots=True)
class ConfigFile:
    path: str
    strategy: str
    options: LoadOptions
    document: dict[str, Any]  # everything, validated


def read_config(path: str | os.PathLike[str]) -> ConfigFile:
    name = str(path)
    try:
        document = parse_toml(read_small_file(name, MAX_CONFIG_BYTES))
    except UnusableFile as exc:
        raise ConfigError(f"{name}: {exc.reason}") from None
    return validate(name, document)


def _check_table(
    where: str,
    table: object,
    keys: Mapping[str, tuple[Check, str]],
    fail: Callable[[str, str], ConfigError],
) -> None:
    """``table`` is a table whose every key is in ``keys`` ("*": any key) with a value that
    passes its check; else one line naming the key at fault."""
    if not isinstance(table, dict):
        raise fail(where, "must be a table")
    for key, value in table.items():
        check, what = keys.get(key) or keys.get("*") or (None, "")
        if check is None:
            raise fail(f"{where}.{key}", "unknown key")
        if not check(value):
            raise fail(f"{where}.{key}", f"must be {what}, not {value!r}")


def validate(name: str, document: dict[str, Any]) -> ConfigFile:
    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{name}: {key}: {problem}")

    for key in document:
        if key not in TOP_KEYS:
            raise fail(key, "unknown key")
    version = document.get("format_version")
    if version != FORMAT_VERSION:
        raise fail(
            "format_version", f"is {version!r}; this modelmon reads version {FORMAT_VERSION}"
        )
    for section, keys in SCHEMA.items():
        _check_table(section, document.get(section, {}), keys, fail)
    for rank, alternative in enumerate(document.get("alternatives", []), 1):
        _check_table(f"alternatives[{rank}]", alternative, ALTERNATIVE_KEYS, fail)
    validate_identity(document.get("identity", {}), fail)
    if not _strings(document.get("explanation", [])):
        raise fail("explanation", "must be a list of sentences")
    fit = document.get("fit", {})
    if fit.get("fits") is False and "recommended" not in document:
        raise ConfigError(
            f"{name}: the model did not fit in the memory allowed there: no configuration "
            f"loads it (it needs at least {fit.get('needs_bytes', 0) / 2**30:.1f} GiB); "
            "measure again with more memory (recommend --memory-limit) or fewer weights per "
            "process (recommend --ranks N)"
        )
    ranks = document.get("ranks", {})
    if ranks.get("fits") is False and "recommended" not in document:
        limit, least = ranks.get("memory_limit_bytes"), ranks.get("least_needed_bytes")
        within = f" within {limit / 2**20:,.0f} MiB" if isinstance(limit, int) else ""
        needed = f" (the least a way needed: {least / 2**20:,.0f} MiB)" if least else ""
        raise ConfigError(
            f"{name}: no way of loading {ranks.get('ranks', '?')} ranks fit{within} there: "
            f"nothing to apply{needed}; measure again with a larger limit (recommend --ranks "
            "N --memory-limit SIZE) or fewer ranks"
        )
    strategy, options = _recommended(document.get("recommended"), fail)
    return ConfigFile(name, strategy, options, document)


def _recommended(table: Any, fail: Callable[[str, str], ConfigError]) -> tuple[str, LoadOptions]:
    from modelmon.core.loading.strategies import get_strategy

    if not isinstance(table, dict):
        raise fail("recommended", "missing (the [recommended] table names the strategy)")
    values = dict(table)
    strategy = values.pop("strategy", None)
    if not isinstance(strategy, str):
        raise fail("recommended.strategy", "missing or not a string")
    try:
        get_strategy(strategy)
    except OptionsError as exc:
        raise fail("recommended.strategy", str(exc)) from None
    if "chunk_mib" in values:  # how files write it; ``chunk`` (bytes or "8MiB") reads too
        if "chunk" in values:
            raise fail("recommended.chunk_mib", "give chunk or chunk_mib, not both")
        try:
            values["chunk"] = chunk_from_mib(values.pop("chunk_mib"))
        except OptionsError as exc:
            raise fail("recommended.chunk_mib", str(exc)) from None
    for key, value in values.items():
        if key not in OPTION_NAMES:
            raise fail(f"recommended.{key}", "unknown key")
        if key == "chunk" and isinstance(value, str):
            try:
                values[key] = parse_size(value)
            except OptionsError as exc:
                raise fail("recommended.chunk", str(exc)) from None
    try:
        return strategy, from_mapping(values)
    except OptionsError as exc:
        key = next((k for k in values if k in str(exc)), "")
        raise fail(f"recommended.{key}" if key else "recommended", str(exc)) from None


def apply_config(
    config: str | os.PathLike[str],
    model: Model,
    strategy: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> StrategyConfig:
    """The configuration a load of ``model`` runs with under ``config`` (a file written by
    ``modelmon recommend`` or the app). ``strategy`` and ``options`` (``LoadOptions`` field
    names) given here win over the file's, which win over the defaults.

    What the file says of another machine does not stop the load. Measured on another model
    or storage, the file still applies, with a one-line ``ConfigMismatchWarning`` naming what
    differs. Its readahead, a fact of the device it was measured on, is left out where this
    process may not set it, with a ``ReadaheadSkippedWarning`` saying why: the load runs with
    the device as it is. A readahead in ``options`` is the caller's own: where it cannot be
    set the load refuses it (``ReadaheadError``)."""
    read = read_config(config)
    given = dict(options or {})
    resolved = from_mapping(given, base=read.options)
    warn_if_different(read.path, read.document.get("identity"), model)
    if "readahead" not in given and resolved.readahead is not None:
        why = readahead.unavailable([f.path for f in model.files])
        if why is not None:
            warn(
                f"{read.path}: its readahead of {resolved.readahead} KiB is not applied ({why}): "
                "the load runs with the device's own",
                ReadaheadSkippedWarning,
            )
            resolved = resolved.with_(readahead=None)
    return StrategyConfig(strategy or read.strategy, resolved)
