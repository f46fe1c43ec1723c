"""The models whose files sit directly in one folder, as ``open_model`` would open them.

Discovery (``model.discovery``) asks this of every folder it enters: a shard index is a model,
loose safetensors files are one model or one each, every GGUF file is one (but a part of a
llama.cpp split). Files are stat'ed, never read; an index is read through ``parse_index``.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats.safetensors_index import parse_index
from modelmon.core.model.references import WEIGHT_SUFFIXES

INDEX_SUFFIX = ".safetensors.index.json"
# llama.cpp's split files (gguf-split): one model in several files, which open_model cannot
# combine yet; listing a part would measure a fraction of a model.
_SPLIT_GGUF = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


@dataclass(frozen=True, slots=True)
class FolderModel:
    """A model inside one folder, before it is named."""

    path: Path  # what to open: a file, an index, or the folder itself
    format: str
    files: tuple[Path, ...]
    bytes: int
    opens_folder: bool  # open_model(folder) opens exactly this model


def folder_models(
    folder: Path, entries: list[os.DirEntry[str]], skipped: list[str]
) -> list[FolderModel]:
    """The models whose files sit directly in ``folder``, as open_model would open them.

    Each shard index is a model; safetensors files no index claims are one model together
    when there is no index (open_model combines them) and one each beside an index; every
    GGUF file is a model. Unusable entries add a line to ``skipped``.
    """
    sizes: dict[str, int] = {}
    indexes: list[str] = []
    unusable: list[str] = []
    for entry in entries:
        if entry.name.startswith(".") or not entry.name.endswith(WEIGHT_SUFFIXES):
            continue
        try:
            status = entry.stat()  # follows a symlink: the blob's size
        except OSError as exc:
            unusable.append(entry.name)
            is_dangling = isinstance(exc, FileNotFoundError) and entry.is_symlink()
            reason = "a link to a missing file (an interrupted download?)" if is_dangling else None
            skipped.append(f"{entry.path}: {reason or exc.strerror or exc}")
            continue
        if not stat.S_ISREG(status.st_mode):
            continue
        if entry.name.endswith(INDEX_SUFFIX):
            indexes.append(entry.name)
        else:
            sizes[entry.name] = status.st_size
    # With an unusable weight file open_model(folder) would open another set: name files.
    folder_is_clean = not unusable
    found: list[FolderModel] = []
    claimed: set[str] = set()
    for index in sorted(indexes):
        try:
            shards = sorted({Path(shard).name for shard in parse_index(folder / index).values()})
        except ModelFormatError as exc:
            skipped.append(str(exc))
            continue
        claimed.update(shards)
        missing = [shard for shard in shards if shard not in sizes]
        if missing:
            skipped.append(
                f"{folder / index}: shard {missing[0]} is missing "
                f"({len(missing)} of {len(shards)} missing)"
            )
            continue
        files = tuple(folder / shard for shard in shards)
        total = sum(sizes[shard] for shard in shards)
        only_index = folder_is_clean and len(indexes) == 1
        found.append(FolderModel(folder / index, "safetensors", files, total, only_index))
    loose = sorted(n for n in sizes if n.endswith(".safetensors") and n not in claimed)
    if indexes:
        found += [_single(folder, name, "safetensors", sizes, False) for name in loose]
    elif loose and folder_is_clean:
        path = folder / loose[0] if len(loose) == 1 else folder
        files = tuple(folder / name for name in loose)
        found.append(FolderModel(path, "safetensors", files, sum(sizes[n] for n in loose), True))
    elif loose:
        skipped.append(f"{folder}: safetensors files with an unusable one ({unusable[0]})")
    ggufs = sorted(name for name in sizes if name.endswith(".gguf"))
    only_gguf = folder_is_clean and not indexes and not loose and len(ggufs) == 1
    for name in ggufs:
        split = _SPLIT_GGUF.search(name)
        if split is None:
            found.append(_single(folder, name, "gguf", sizes, only_gguf))
        elif split.group(1) == "00001":
            skipped.append(f"{folder / name}: a GGUF split in {int(split.group(2))} files")
    return found


def _single(
    folder: Path, name: str, format: str, sizes: dict[str, int], opens: bool
) -> FolderModel:
    return FolderModel(folder / name, format, (folder / name,), sizes[name], opens)
