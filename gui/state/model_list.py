"""The start page's list of discovered models: rows, filtering and sorting. Qt-free."""

from __future__ import annotations

from dataclasses import dataclass

from modelmon.core import DiscoveredModel
from modelmon.core.model import nothing_found
from modelmon.core.output import human_bytes

COLUMNS = ("Name", "Format", "Files", "Size", "Where", "Reference")
SORT_KEYS = ("name", "size")
SOURCE_NAMES = {
    "hf": "Hugging Face cache",
    "ollama": "Ollama",
    "lmstudio": "LM Studio",
    "llamacpp": "llama.cpp cache",
    "folder": "folder",
}


@dataclass(frozen=True, slots=True)
class ModelRow:
    """One discovered model as the start page shows it; ``reference`` is what opens it."""

    reference: str
    name: str
    format: str
    files: int
    bytes: int
    where: str  # the store, then the storage: "Ollama · ext4 on nvme0n1 (local)"
    tip: str

    def cells(self) -> tuple[str, ...]:
        return (
            self.name,
            self.format,
            str(self.files),
            human_bytes(self.bytes),
            self.where,
            self.reference,
        )

    def matches(self, text: str) -> bool:
        """Every word of ``text`` is in the name, reference, format or where (any case)."""
        haystack = " ".join((self.name, self.reference, self.format, self.where)).lower()
        return all(word in haystack for word in text.lower().split())


def storage_text(model: DiscoveredModel) -> str:
    facts = model.storage
    if facts is None:
        return "storage unknown"
    kind = "network" if facts.is_network else "FUSE" if facts.is_fuse else "local"
    device = f" on {facts.partition or facts.block_device}" if facts.block_device else ""
    return f"{facts.fs_type}{device} ({kind})"


def model_row(model: DiscoveredModel) -> ModelRow:
    where = f"{SOURCE_NAMES.get(model.source, model.source)} · {storage_text(model)}"
    tip_lines = [model.name, model.path, *(f"  {file}" for file in model.files[:8])]
    if len(model.files) > 8:
        tip_lines.append(f"  … and {len(model.files) - 8} more files")
    if model.storage is not None:
        tip_lines.append(model.storage.description)
    return ModelRow(
        reference=model.reference,
        name=model.name,
        format=model.format,
        files=len(model.files),
        bytes=model.bytes,
        where=where,
        tip="\n".join(tip_lines),
    )


def visible_rows(
    rows: list[ModelRow], filter_text: str = "", sort: str = "name", descending: bool = False
) -> list[ModelRow]:
    """The rows matching ``filter_text``, sorted by ``sort`` ("name" or "size")."""
    if sort not in SORT_KEYS:
        raise ValueError(f"sort by one of {SORT_KEYS}, not {sort!r}")
    shown = [row for row in rows if row.matches(filter_text)]
    if sort == "size":
        shown.sort(key=lambda row: (row.bytes, row.name.lower()), reverse=descending)
    else:
        shown.sort(key=lambda row: (row.name.lower(), row.reference), reverse=descending)
    return shown


def summary_text(shown: int, total: int, searched: int, truncated: bool) -> str:
    if total == 0:  # where to look next, as the app takes it
        text = (
            f"{nothing_found(searched)}. Open a file or folder, or name the folders your models "
            "are in with MODELMON_MODEL_DIRS (separated by ':') and search again."
        )
    elif shown == total:
        text = f"{total} model{'s' if total != 1 else ''} found"
    else:
        text = f"{shown} of {total} models match"
    if truncated:
        text += " (search stopped early: some folders were not fully searched)"
    return text
