"""The config file: a measured configuration and its evidence, as TOML. Built from the runs
(``build_document``), written atomically, read back with validation (an unknown key or a bad
value is one clear line naming the key)."""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from modelmon.core.errors import ConfigError, OptionsError
from modelmon.core.model.formats.opening import open_model_file
from modelmon.core.model.records import Model
from modelmon.core.options import (
    OPTION_NAMES,
    LoadOptions,
    MiB,
    chunk_from_mib,
    from_mapping,
    parse_size,
)
from modelmon.core.output.identity import IDENTITY_KEYS, model_identity, validate_identity
from modelmon.core.output.snippets import apply_snippets
from modelmon.core.system.files import UnusableFile, parse_toml, read_small_file
from modelmon.core.system.memory import memory_facts
from modelmon.core.system.outputs import check_output
from modelmon.core.system.storage import storage_facts

if TYPE_CHECKING:
    from modelmon.core.measuring.candidate import Candidate
    from modelmon.core.measuring.ceilings import Ceilings
    from modelmon.core.measuring.recommend import Recommendation

FORMAT_VERSION = 1
MAX_CONFIG_BYTES = 1 << 20  # a written config is a few kB
FINGERPRINT_BYTES = 1 << 20  # the head of each file: headers hold every name and offset

Check = Callable[[Any], bool]
_str: Check = lambda v: isinstance(v, str)  # noqa: E731
_bool: Check = lambda v: isinstance(v, bool)  # noqa: E731
_count: Check = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
_number: Check = lambda v: isinstance(v, int | float) and not isinstance(v, bool)  # noqa: E731
_strings: Check = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731

# section -> {key: (check, what it must be)}; "*" means any key with that check.
# [recommendation]: the overall pick, which may be a peer loader that beat modelmon's best
# ([recommended] still holds modelmon's best, so the file stays applicable to core.load).
RECOMMENDATION_KEYS: dict[str, tuple[Check, str]] = {
    "pick": (_str, "a spec"),
    "loader": (_str, "modelmon or a peer loader's name"),
    "median_mbps": (_number, "MB/s"),
    "runs": (_count, "a run count"),
    "in_config": (_bool, "true or false"),
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
    },
    "evidence": {
        "runs": (_count, "a run count"),
        "cache": (_str, "cold or warm"),
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
        "ceilings_mbps": (
            lambda v: isinstance(v, dict) and all(_number(x) for x in v.values()),
            "MB/s by name",
        ),
    },
    "apply": {"*": (_str, "a snippet")},
    "recommendation": RECOMMENDATION_KEYS,
    "identity": IDENTITY_KEYS,
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
    "explanation",
    "identity",
    "recommendation",
}


@dataclass(frozen=True, slots=True)
class ConfigFile:
    path: str
    strategy: str
    options: LoadOptions
    document: dict[str, Any]  # everything, validated


def fingerprint(model: Model) -> str:
    """Names, sizes and the head of every file: changes when the model does, cheap to take."""
    digest = hashlib.blake2b(digest_size=16)
    for file in model.files:
        digest.update(f"{Path(file.path).name}\0{file.size}\0".encode())
        with open_model_file(file.path) as handle:  # a file swapped for a FIFO: no hang
            digest.update(handle.read(FINGERPRINT_BYTES))
    return digest.hexdigest()


def build_document(
    model: Model,
    winner: Candidate,
    ranked: Sequence[Candidate],
    ceilings: Ceilings | None,
    explanation: Sequence[str],
    *,
    config_name: str,
    cache: str,
    usable_ram: int,
    memory_limit: int | None = None,
    budget_s: float | None = None,
    peers: Sequence[Candidate] = (),
    pick: Candidate | None = None,
) -> dict[str, Any]:
    """The config document for ``winner``, measured on ``model``.

    ``ranked``: every configuration measured, best first (``winner`` among them; the others
    become the alternatives). ``cache``: the verified page-cache state every run started
    from. ``usable_ram``/``memory_limit``: the RAM the search allowed (the limit only when
    one was set). ``budget_s``: the seconds of a budgeted search, or None (an A/B has none).
    ``peers``: other loaders measured beside modelmon, so their snippets carry their figures.
    ``pick``: the overall pick when it is not ``winner`` (a peer that beat modelmon's best).
    Reads the head of every model file for the fingerprint.
    """
    facts = storage_facts(model.files[0].path)
    machine: dict[str, Any] = {
        "ram_bytes": memory_facts().total,
        "usable_ram_bytes": usable_ram,
        "cpus": os.cpu_count() or 1,
        "fs_type": facts.fs_type,
        "device": facts.block_device or facts.source,
        "network": facts.is_network,
        "fuse": facts.is_fuse,
        "kernel": platform.release(),
    }
    if memory_limit is not None:
        machine["memory_limit_bytes"] = memory_limit
    if facts.rotational is not None:
        machine["rotational"] = facts.rotational
    if facts.read_ahead_kb is not None:
        machine["read_ahead_kb"] = facts.read_ahead_kb
    runs = winner.results
    ceiling_items = ceilings.items if ceilings is not None else ()
    evidence: dict[str, Any] = {
        "runs": len(runs),
        "cache": cache,
        "median_mbps": round(winner.median_mbps, 1),
        "min_mbps": round(min(r.mbps for r in runs), 1),
        "max_mbps": round(max(r.mbps for r in runs), 1),
        "median_seconds": round(sorted(r.seconds for r in runs)[len(runs) // 2], 4),
        "all_runs_verified": all(r.cache.warm if cache == "warm" else r.cache.cold for r in runs),
        "ceilings_mbps": {c.name: round(c.mbps, 1) for c in ceiling_items},
    }
    if budget_s is not None:
        evidence["budget_seconds"] = budget_s
    # What its runs held: the load's own processes, and all of modelmon's (priming included).
    evidence["peak_rss_bytes"] = max(r.workers_peak_rss for r in runs)
    trees = [r.process_tree_peak_rss for r in runs]
    if all(tree is not None for tree in trees):
        evidence["process_tree_peak_rss_bytes"] = max(t for t in trees if t is not None)
    fraction = None if ceilings is None else ceilings.fraction(winner.median_mbps, "parallel_read")
    if fraction is not None:
        evidence |= {"ceiling": "parallel_read", "fraction_of_ceiling": round(fraction, 3)}
    chosen = pick or winner
    apply = apply_snippets(model, winner, tuple(ranked), config_name, tuple(peers))
    if chosen is not winner:
        apply["modelmon"] += (
            f"  (modelmon's best; the overall pick is {chosen.spec} at "
            f"{chosen.median_mbps:.0f} MB/s, see [recommendation])"
        )
    return {
        "format_version": FORMAT_VERSION,
        "model": {
            "path": model.path,
            "bytes": model.file_bytes,
            "format": model.format,
            "files": len(model.files),
            "fingerprint": fingerprint(model),
        },
        "machine": machine,
        "recommended": recommended_table(winner.strategy, winner.options),
        "evidence": evidence,
        "alternatives": [
            {
                "rank": rank,
                "strategy": c.strategy,
                "spec": c.spec,
                "median_mbps": round(c.median_mbps, 1),
                "runs": len(c.results),
                **({"note": _note(c)} if _note(c) else {}),
            }
            for rank, c in enumerate(ranked, 1)
            if c is not winner
        ],
        "apply": apply,
        "explanation": list(explanation),
        "identity": model_identity(model),
        "recommendation": {
            "pick": chosen.spec,
            "loader": "modelmon" if chosen.peer is None else chosen.strategy,
            "median_mbps": round(chosen.median_mbps, 1),
            "runs": len(chosen.results),
            "in_config": chosen is winner,
        },
    }


def recommended_table(strategy: str, options: LoadOptions) -> dict[str, Any]:
    """The [recommended] table: the strategy and the options it uses (no others: a knob it
    ignores would read as if it mattered); a chunk of whole MiB as ``chunk_mib``."""
    from modelmon.core.loading.strategies import get_strategy

    uses = get_strategy(strategy).uses
    table: dict[str, Any] = {"strategy": strategy}
    for name, value in options.to_dict().items():
        if name not in uses:
            continue
        if name == "chunk" and value % MiB == 0:
            table["chunk_mib"] = value // MiB
        else:
            table[name] = value
    return table


# Comments on keys of [recommended], by key and value: TOML writers keep no comments, so
# ``render`` adds them. Said where a value alone would mislead.
KEEP_COMMENT = (
    "# keep: a load leaves the page cache as it finds it. The evidence below was measured "
    "from a\n# verified {cache} cache: expect its figures when the model's pages are not "
    "cached (a fresh start)."
)
# The same where the runs asked for a state they did not all start from (a file in RAM
# cannot be made cold): the evidence is not said to be of that state.
KEEP_UNVERIFIED_COMMENT = (
    "# keep: a load leaves the page cache as it finds it. The evidence below asked for a "
    "{cache}\n# cache and did not always start from one (all_runs_verified = false): its "
    "figures\n# {missed}."
)
MISSED = {
    "cold": "include pages that were already in RAM",
    "warm": "include reads from the storage",
}


def render(document: Mapping[str, Any]) -> str:
    """The document as TOML, with comments where a value needs one."""
    text = tomli_w.dumps(dict(document))
    evidence = document.get("evidence", {})
    evidence_cache = evidence.get("cache")
    verified = evidence.get("all_runs_verified", True)
    comment = KEEP_COMMENT if verified else KEEP_UNVERIFIED_COMMENT
    lines, section = [], ""
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip()
        if section == "[recommended]" and line == 'cache = "keep"' and evidence_cache:
            missed = MISSED.get(evidence_cache, "are not those of that state")
            lines.extend(comment.format(cache=evidence_cache, missed=missed).splitlines())
        lines.append(line)
    return "\n".join(lines) + "\n"


def recommendation_document(
    rec: Recommendation, config_name: str, memory_limit: int | None = None
) -> dict[str, Any]:
    """The config document for the result of ``recommend`` (every run asked to start cold)."""
    return build_document(
        rec.model,
        rec.winner,
        rec.ranked,
        rec.ceilings,
        rec.explanation,
        config_name=config_name,
        cache="cold",
        usable_ram=rec.usable_ram,
        memory_limit=memory_limit,
        budget_s=rec.budget_s,
        peers=rec.peers,
        pick=rec.used,
    )


def _note(candidate: Candidate) -> str:
    parts = [candidate.role] if candidate.role else []
    if not candidate.results and candidate.stopped_below_mbps is not None:
        parts.append(
            f"{candidate.reason or 'stopped early'}: median_mbps is the bound it stayed under"
        )
    return "; ".join(parts)


def write_config(
    path: str | os.PathLike[str],
    document: Mapping[str, Any],
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write through the guard (``modelmon.core.system.outputs``; ``inputs``: the files of
    the model measured), atomically: the old file survives any failure."""
    output = check_output(path, inputs, ConfigError)
    output.write(render(document).encode(), ConfigError)
    return output.path or Path(os.fspath(path))


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
