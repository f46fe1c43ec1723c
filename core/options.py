"""Load options shared by every strategy, validated in one place (API, CLI and config)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, get_args

from modelmon.core.errors import OptionsError

MiB = 1 << 20
FADVISE_HINTS = ("none", "sequential", "random", "willneed", "noreuse")
MADVISE_HINTS = ("none", "sequential", "random", "willneed", "hugepage")
PARTITIONS = ("contiguous", "round-robin")
CacheMode = Literal["cold", "warm", "keep"]  # the page-cache state a load starts from
CACHE_MODES: tuple[CacheMode, ...] = get_args(CacheMode)
PREFETCH_MODES = ("read", "willneed", "both")
# Priming free memory before a measured load (``modelmon.core.system.host_memory``): "auto"
# where a VM's host takes freed memory back, "on" wherever, "off" never.
PrimeMode = Literal["off", "auto", "on"]
PRIME_MODES: tuple[PrimeMode, ...] = get_args(PrimeMode)
MAX_PARALLEL = 256
MIN_CHUNK = 4096  # one page: a smaller read costs a system call for less than a page
MAX_CHUNK = 1 << 30
MAX_READAHEAD_KIB = 1 << 20  # 1 GiB: far past any useful readahead, short of a typo's 10**9


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """How to load. Each field is a knob a strategy may use; ``uses`` on a strategy says which."""

    # Four readers, each with its own descriptor: measured on a local virtio disk and on an
    # rclone FUSE mount (benchmarks/loader_speed.py), 1 → 2 → 4 readers kept gaining (0.6 →
    # 0.85 → ~1.0 of a plain parallel read), 8 did not gain further; one process is enough.
    workers: int = 1  # processes (in-process: thread groups, i.e. workers × threads readers)
    threads: int = 4  # reader threads per worker
    chunk: int = 8 * MiB  # bytes per read where reads are chunked
    fadvise: str = "none"  # posix_fadvise hint on each descriptor before reading
    madvise: str = "none"  # madvise hint on each mapping (mmap strategies)
    partition: str = "contiguous"  # how tensors are dealt to workers
    cache: CacheMode = "keep"  # page-cache state to start from
    verify: bool = False  # per-tensor crc32, identical across strategies
    discard: bool = False  # stream through bounded buffers and keep nothing
    prefetch: str = "read"  # warmup strategy: parallel read pass, WILLNEED, or both
    # KiB of device readahead set for the run (and restored after it, see
    # ``modelmon.core.system.readahead``); None leaves the device as it is.
    readahead: int | None = None

    def __post_init__(self) -> None:
        for name in ("workers", "threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise OptionsError(f"{name} must be a whole number ≥ 1, not {value!r}")
            if value > MAX_PARALLEL:
                raise OptionsError(f"{name} must be ≤ {MAX_PARALLEL}, not {value}")
        chunk = self.chunk
        if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < MIN_CHUNK:
            raise OptionsError(f"chunk must be at least {MIN_CHUNK} bytes, not {chunk!r}")
        if chunk > MAX_CHUNK:
            raise OptionsError(f"chunk must be at most {MAX_CHUNK // MiB} MiB, not {chunk}")
        for name, allowed in (
            ("fadvise", FADVISE_HINTS),
            ("madvise", MADVISE_HINTS),
            ("partition", PARTITIONS),
            ("cache", CACHE_MODES),
            ("prefetch", PREFETCH_MODES),
        ):
            if getattr(self, name) not in allowed:
                choices = ", ".join(allowed)
                raise OptionsError(f"{name} must be one of {choices}, not {getattr(self, name)!r}")
        readahead = self.readahead
        if readahead is not None and (
            not isinstance(readahead, int)
            or isinstance(readahead, bool)
            or not 0 <= readahead <= MAX_READAHEAD_KIB
        ):
            raise OptionsError(
                f"readahead must be whole KiB from 0 to {MAX_READAHEAD_KIB}, not {readahead!r}"
            )
        for name in ("verify", "discard"):
            if not isinstance(getattr(self, name), bool):
                raise OptionsError(f"{name} must be true or false, not {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, Any]:
        """Every option; ``readahead`` only when set (TOML has no null, and unset is the norm)."""
        data = asdict(self)
        if self.readahead is None:
            del data["readahead"]
        return data

    def with_(self, **changes: Any) -> LoadOptions:
        """A copy with some options changed, validated like the rest."""
        return from_mapping(changes, base=self)


OPTION_NAMES = tuple(f.name for f in fields(LoadOptions))


def from_mapping(values: Mapping[str, Any], base: LoadOptions | None = None) -> LoadOptions:
    """Build options from a mapping; an unknown key is an error naming it."""
    unknown = sorted(set(values) - set(OPTION_NAMES))
    if unknown:
        raise OptionsError(f"unknown option {unknown[0]!r} (known: {', '.join(OPTION_NAMES)})")
    current = asdict(base) if base is not None else {}
    current.update(values)
    return LoadOptions(**current)


# ASCII digits only: \d would take '²' and other digits that int() and float() refuse, and
# str.isdigit() takes '٣', which int() reads as 3.
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE | re.ASCII)
_WHOLE = re.compile(r"\s*[0-9]+\s*", re.ASCII)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_NO_READAHEAD = ("none", "default", "")
MIN_CHUNK, MAX_CHUNK = 4096, 1 << 30


def parse_size(text: str) -> int:
    """'8MiB', '512k', '1G', '4096' → bytes (binary units; a bare number is bytes)."""
    match = _SIZE.match(text)
    if not match:
        raise OptionsError(f"not a size: {text!r} (try 8MiB, 512KiB, 1GiB)")
    number, unit = match.group(1), (match.group(2) or "").lower()[:1]
    if len(number) > 24:  # past any real size; float() of 400 digits is inf, int(inf) raises
        raise OptionsError(f"size too large: {text!r}")
    return int(float(number) * _UNITS[unit])


def parse_count(name: str, text: str) -> int:
    """``workers``/``threads`` from text: a whole number of ASCII digits, 1 to MAX_PARALLEL."""
    if _WHOLE.fullmatch(text) and 1 <= int(text) <= MAX_PARALLEL:
        return int(text)
    raise OptionsError(f"{name} must be a whole number from 1 to {MAX_PARALLEL}, not {text!r}")


def parse_readahead(text: str) -> int | None:
    """'4096' (KiB, the unit of read_ahead_kb), '4MiB', '128KiB' → KiB; 'none' → None."""
    if text.strip().lower() in _NO_READAHEAD:
        return None
    allowed = f"whole KiB from 0 to {MAX_READAHEAD_KIB} (4096, or a size such as 4MiB)"
    if _WHOLE.fullmatch(text):
        kib = int(text)
    else:
        try:
            size = parse_size(text)
        except OptionsError:
            raise OptionsError(f"readahead must be {allowed}, not {text!r}") from None
        if size % 1024:
            raise OptionsError(f"readahead must be {allowed}, not {text!r}")
        kib = size // 1024
    if kib > MAX_READAHEAD_KIB:
        raise OptionsError(f"readahead must be {allowed}, not {text!r}")
    return kib


def chunk_from_mib(mib: object) -> int:
    """A chunk given in MiB (a number, as ``--chunk-mib`` and config files give it) → bytes."""
    allowed = f"a number of MiB from {MIN_CHUNK / MiB:g} to {MAX_CHUNK // MiB}"
    if not isinstance(mib, int | float) or isinstance(mib, bool) or not math.isfinite(mib):
        raise OptionsError(f"chunk must be {allowed}, not {mib!r}")
    chunk = int(mib * MiB)
    if not MIN_CHUNK <= chunk <= MAX_CHUNK:
        raise OptionsError(f"chunk must be {allowed}, not {mib!r}")
    return chunk


def parse_spec(spec: str) -> tuple[str, LoadOptions]:
    """'sequential workers=4 chunk=16MiB fadvise=sequential' → (strategy, options).

    The syntax of ``bench --a/--b`` and of the GUI's strategy summary line.
    """
    words = spec.split()
    if not words:
        raise OptionsError("empty strategy spec")
    strategy, values = words[0], {}
    for word in words[1:]:
        key, sep, raw = word.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise OptionsError(f"option {word!r} must look like name=value")
        values[key] = _coerce(key, raw)
    return strategy, from_mapping(values)


def _coerce(key: str, raw: str) -> Any:
    if key in ("workers", "threads"):
        return parse_count(key, raw)
    if key == "chunk":
        return parse_size(raw)
    if key == "readahead":
        return parse_readahead(raw)
    if key in ("verify", "discard"):
        if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise OptionsError(f"{key} must be true or false, not {raw!r}")
        return raw.lower() in ("true", "1", "yes")
    return raw


def option_text(name: str, value: Any) -> str:
    """``name=value`` as every line that names an option writes it (``chunk=16MiB``,
    ``verify=true``), and as ``parse_spec`` reads it back."""
    if name == "chunk":
        value = f"{value // MiB}MiB" if value % MiB == 0 else str(value)
    elif name == "readahead":
        value = "none" if value is None else str(value)
    elif isinstance(value, bool):
        value = str(value).lower()
    return f"{name}={value}"


def format_spec(strategy: str, options: LoadOptions) -> str:
    """The inverse of parse_spec, naming only what differs from the defaults."""
    default = LoadOptions()
    parts = [strategy]
    for name in OPTION_NAMES:
        value = getattr(options, name)
        if value != getattr(default, name):
            parts.append(option_text(name, value))
    return " ".join(parts)
