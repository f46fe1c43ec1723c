"""What the model panel shows: the parsed model, its summary, storage and memory facts, and
the panel's rows as text (``panel_rows``).

Gathered in a background thread (``gather``): parsing headers and stat-ing files on a network
filesystem can take seconds, and the window must not freeze meanwhile. Qt-free.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from modelmon.core import MemoryFacts, Model, ObjectStorage, StorageFacts, open_model
from modelmon.core.errors import redact_url
from modelmon.core.output import human_bytes, model_summary
from modelmon.core.storage import object_storage
from modelmon.core.system import (
    RETURNS_FREE_MEMORY,
    memory_facts,
    readahead_unavailable,
    storage_by_folder,
    swap_warning,
)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    path: str  # what the user opened (file, index, folder or URL), as it is written
    model: Model
    summary: dict[str, Any]  # model_summary(): format, files, bytes, tensors, dtypes, blocks
    storage: tuple[StorageFacts, ...]  # one per folder holding model files
    memory: MemoryFacts
    readahead_unavailable: str | None = None  # why readahead can't be set here; None: it can
    objects: tuple[ObjectStorage, ...] = ()  # where a model in object storage lives
    # ``path`` is the one opened, nothing in it redacted: it may be kept to open again (a
    # URL whose query was redacted opens only as it was given, which is never kept).
    keepable: bool = True

    @property
    def in_bucket(self) -> bool:
        """The model is in object storage (s3://, https://): read by ranged GETs."""
        return any(file.remote is not None for file in self.model.files)

    @property
    def name(self) -> str:
        return os.path.basename(self.path.rstrip("/")) or self.path

    @property
    def fits_in_ram(self) -> bool:
        return self.model.total_bytes <= self.memory.usable


NO_READAHEAD = "object storage: no page cache or readahead lies between the bucket and a load"


def gather(path: str) -> ModelInfo:
    """Parse the model and collect the facts; raises ModelFormatError for a bad file (and
    StorageError for what a bucket refused)."""
    model = open_model(path)
    objects = [f.remote for f in model.files if f.remote is not None]
    if objects:
        summary = model_summary(model)
        written = redact_url(path)  # the window's title, the exports, the recent models
        return ModelInfo(
            written,
            model,
            summary,
            (),
            memory_facts(),
            NO_READAHEAD,
            object_storage(objects),
            keepable=written == path,
        )
    storage = storage_by_folder(f.path for f in model.files)
    paths = [f.path for f in model.files]
    return ModelInfo(
        path, model, model_summary(model), storage, memory_facts(), readahead_unavailable(paths)
    )


NAMED_BLOCKS = ("embeddings", "head", "other")


@dataclass(frozen=True, slots=True)
class PanelRow:
    text: str
    tip: str | None = None  # replaces the row's own tooltip when given
    level: str | None = None  # "warning" | "error": the row stands out
    title: str | None = None  # replaces the row's own title when given (a bucket's rows)


def _yes_no(value: bool | None, yes: str = "yes", no: str = "no") -> str:
    return "unknown" if value is None else (yes if value else no)


def device_text(facts: StorageFacts) -> str:
    if facts.block_device is None:
        return facts.source or "none"
    where = facts.partition or facts.block_device
    if facts.partition:
        where += f" of {facts.block_device}"
    return f"{where} ({facts.transport})" if facts.transport else where


def rotational_text(facts: StorageFacts) -> str:
    if facts.rotational and facts.transport in ("virtio", "scsi", "virtual"):
        # A virtual disk's flag is whatever the hypervisor says, often "rotational".
        return "yes (as the virtual disk reports it)"
    return _yes_no(facts.rotational)


def network_text(facts: StorageFacts) -> str:
    if facts.is_fuse:
        return "FUSE, possibly network" if facts.is_network else "FUSE, local"
    return "network filesystem" if facts.is_network else "no (local)"


def panel_rows(info: ModelInfo) -> dict[str, PanelRow]:
    """Each row of the model panel by key: format, size, tensors... storage, RAM."""
    summary, model = info.summary, info.model
    dtypes = summary["dtypes"]
    blocks = model.blocks()
    layers = sum(1 for b in blocks if b not in NAMED_BLOCKS)
    named = "".join(f" + {b}" for b in blocks if b in NAMED_BLOCKS)
    rows = {
        "file": PanelRow(info.name, info.path),
        "format": PanelRow(f"{summary['format']}, {len(summary['files'])} file(s)"),
        "size": PanelRow(
            f"{human_bytes(summary['bytes'])} on disk, "
            f"{human_bytes(summary['tensor_bytes'])} of tensors"
        ),
        "tensors": PanelRow(f"{summary['tensors']:,}"),
        "dtypes": PanelRow(
            ", ".join(f"{name} ×{d['tensors']}" for name, d in dtypes.items()),
            "\n".join(
                f"{name}: {d['tensors']} tensors, {human_bytes(d['bytes'])}"
                for name, d in dtypes.items()
            ),
        ),
        "blocks": PanelRow(f"{len(blocks)} ({layers} layers{named})"),
    }
    if info.in_bucket:
        rows.update(object_rows(info))
        rows["memory"] = memory_row(info)
        return rows
    facts = info.storage[0]
    more = f" (+{len(info.storage) - 1} more folders)" if len(info.storage) > 1 else ""
    tip = "\n".join(f.description + f"  [{f.path}]" for f in info.storage)
    readahead = facts.read_ahead_kb
    rows["fs"] = PanelRow(f"{facts.fs_type} at {facts.mount_point}{more}", tip)
    rows["device"] = PanelRow(device_text(facts), tip)
    rows["rotational"] = PanelRow(rotational_text(facts), tip)
    rows["readahead"] = PanelRow("unknown" if readahead is None else f"{readahead} KiB", tip)
    rows["network"] = PanelRow(network_text(facts), tip, "warning" if facts.is_network else None)
    rows["memory"] = memory_row(info)
    return rows


def short_etag(etag: str, keep: int = 8) -> str:
    """'"5a1a2878…"': an ETag's first ``keep`` characters inside its quotes."""
    inner = etag.strip('"')
    return f'"{inner[:keep]}…"' if len(inner) > keep + 1 else etag


def object_rows(info: ModelInfo) -> dict[str, PanelRow]:
    """Where a bucket's model lives, in the rows a file's storage takes (titled for it)."""
    storage = info.objects[0] if info.objects else None
    tip = "\n".join(f"{o.description}  [{o.path}]" for o in info.objects)
    first = info.model.files[0].remote
    # An ETag is one word of 34 or more characters: whole, it alone would make the panel too
    # wide to sit beside the configurations in a 1000 px window. Its start tells objects
    # apart; the row's tip has it whole.
    etag = f"ETag {short_etag(first.etag)}, " if first is not None and first.etag else ""
    objects = [f.remote for f in info.model.files if f.remote is not None]
    if len(objects) > 1:  # the row is of the first; its tip names each
        etag = f"the first of {len(objects)} objects: {etag}"
    tip += "".join(f"\nETag of {o.url}: {o.etag}" for o in objects if o.etag)
    modified = (
        first.last_modified.replace("T", " ").replace("Z", " UTC")  # words that can wrap
        if first is not None and first.last_modified
        else "unknown"
    )
    return {
        "size": PanelRow(
            f"{human_bytes(info.summary['bytes'])} in the bucket, "
            f"{human_bytes(info.summary['tensor_bytes'])} of tensors"
        ),
        "fs": PanelRow(
            (f"bucket {storage.path}" if storage.storage == "s3" else f"server {storage.path}")
            if storage
            else "object storage",
            tip,
            title="Storage",
        ),
        "device": PanelRow(
            f"{storage.endpoint} ({storage.host_kind})" if storage else "unknown",
            tip,
            title="Endpoint",
        ),
        "rotational": PanelRow(
            f"region {storage.region or 'none'}; credentials: {storage.credentials}"
            if storage
            else "unknown",
            tip,
            title="Access",
        ),
        "readahead": PanelRow(f"{etag}last modified {modified}", tip, title="Object"),
        "network": PanelRow(
            "ranged GETs over the network; nothing cached locally",
            tip + f"\n{NO_READAHEAD}",
            "warning",
            title="Network",
        ),
    }


def memory_row(info: ModelInfo) -> PanelRow:
    memory, need = info.memory, info.model.total_bytes
    text = f"{human_bytes(memory.usable)} usable of {human_bytes(memory.total)}; "
    swap = (
        f"swap {human_bytes(memory.swap_used)} used of {human_bytes(memory.swap_total)}"
        if memory.swap_total
        else "no swap"
    )
    facts_tip = (
        f"model + its page cache: {human_bytes(2 * need)} "
        f"({'fits' if memory.fits_with_cache(need) else 'does not fit'}); {swap}; "
        f"transparent hugepages: {memory.hugepages or 'unknown'}"
        + (f"\n{RETURNS_FREE_MEMORY}" if memory.returns_free_memory else "")
        + (f"\n{memory.proactive_reclaim}" if memory.proactive_reclaim else "")
    )
    warning = swap_warning(need, memory)
    if info.fits_in_ram and warning:
        return PanelRow(
            text + f"model {human_bytes(need)} fits, but may push into swap",
            f"{warning}\n{facts_tip}",
            "warning",
        )
    if info.fits_in_ram:
        return PanelRow(text + f"model {human_bytes(need)} fits", facts_tip)
    return PanelRow(
        text + f"model {human_bytes(need)} does NOT fit: only discard mode can run",
        level="error",
    )
