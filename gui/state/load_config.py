"""What a configuration panel's knobs mean: the chunk sizes offered, and the options a load
really gets (those its strategy doesn't use keep their defaults). Qt-free."""

from __future__ import annotations

from modelmon.core import STRATEGIES
from modelmon.core.options import OPTION_NAMES, LoadOptions, format_spec, option_text

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
CHUNK_SIZES = (
    4 * KiB,
    16 * KiB,
    64 * KiB,
    256 * KiB,
    1 * MiB,
    2 * MiB,
    4 * MiB,
    8 * MiB,
    16 * MiB,
    32 * MiB,
    64 * MiB,
    128 * MiB,
    256 * MiB,
    1 * GiB,
)
# The options a panel edits, each with its own knob.
KNOBS = (
    "workers",
    "threads",
    "chunk",
    "fadvise",
    "madvise",
    "partition",
    "cache",
    "verify",
    "discard",
    "prefetch",
)


# Readahead values offered (KiB); None leaves the device as it is.
READAHEAD_CHOICES: tuple[int | None, ...] = (None, 128, 512, 1024, 4096, 16384)


def readahead_text(kb: int | None) -> str:
    """The choice as the editor lists it; None: leave the device's value as it is."""
    return "as is" if kb is None else chunk_text(kb * KiB)


def readahead_blocked(strategy: str, unavailable: str | None) -> str | None:
    """Why the readahead knob is greyed out for ``strategy`` on this model, or None."""
    if unavailable is not None:
        return unavailable
    if strategy == "direct":
        return "O_DIRECT reads bypass the page cache, and so readahead"
    return None


def chunk_text(size: int) -> str:
    """ "4 KiB", "1 GiB", "3000 B": the largest binary unit that divides it."""
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} B"


def strategy_choices() -> list[tuple[str, str]]:
    """(name, what it does in a sentence) of every strategy, in the engine's order."""
    return [(name, cls.summary) for name, cls in STRATEGIES.items()]


def reads_objects(strategy: str) -> bool:
    """``strategy`` reads objects (s3://, https://) by ranged GETs, not files."""
    cls = STRATEGIES.get(strategy)
    return cls is not None and bool(cls.reads_objects)


def strategy_names(objects: bool) -> tuple[str, ...]:
    """The strategies that load a model in object storage (``objects``), or a file."""
    return tuple(name for name in STRATEGIES if reads_objects(name) == objects)


def strategy_summary(strategy: str) -> str | None:
    cls = STRATEGIES.get(strategy)
    return cls.summary if cls is not None else None


def spec_text(strategy: str, options: LoadOptions) -> str:
    """The configuration as one line, as the results and the CLI name it."""
    return format_spec(strategy, options)


def full_spec_text(strategy: str, options: LoadOptions) -> str:
    """Every knob ``strategy`` uses, defaults included, and the cache: what the run will do
    (the spec names only what differs from the defaults, which reads as if they were unset)."""
    # A bucket's load starts with nothing cached here, whatever is asked: no cache to name.
    uses = (
        used_options(strategy) - {"cache"}
        if reads_objects(strategy)
        else used_options(strategy) | {"cache"}
    )
    # Switches off and the device's readahead as it is are what a run does unasked.
    unasked = {"verify": False, "discard": False, "readahead": None}
    shown = [
        option_text(name, getattr(options, name))
        for name in OPTION_NAMES
        if name in uses and not (name in unasked and getattr(options, name) == unasked[name])
    ]
    return " ".join([strategy, *shown])


def summary_text(strategy: str, options: LoadOptions) -> str:
    """The configuration as its panel's line says it: ``full_spec_text``, and for a
    bucket's strategies in the panel's own words, connections and part size ("ranged: 4
    connections, 8 MiB parts"): a thread of a ranged load is a connection to the endpoint,
    its chunk the part each GET asks for."""
    if not reads_objects(strategy):
        return full_spec_text(strategy, options)
    count = options.threads
    connections = f"{count} connection{'s' if count != 1 else ''}"
    if options.workers > 1:
        connections = f"{options.workers} workers × {connections} each"
    switches = [name for name in ("verify", "discard") if getattr(options, name)]
    words = [connections, f"{chunk_text(options.chunk)} parts", *switches]
    return f"{strategy}: " + ", ".join(words)


def used_options(strategy: str) -> frozenset[str]:
    cls = STRATEGIES.get(strategy)
    return cls.uses if cls is not None else frozenset()


def effective_options(strategy: str, edited: LoadOptions, discard_forced: bool) -> LoadOptions:
    """The options as edited, those ``strategy`` doesn't use back at their defaults (so the
    spec and the results name only what matters); discard stays on when it is forced."""
    uses = used_options(strategy)
    default = LoadOptions()
    unused = {name: getattr(default, name) for name in KNOBS if name not in uses}
    if discard_forced:
        unused.pop("discard", None)
    return edited.with_(**unused) if unused else edited
