"""Discovery: the models already on this machine, where users and their tools keep them.

Looks in the Hugging Face hub cache, Ollama's stores, LM Studio's and llama.cpp's folders and
any folders the user names; never anywhere else, so a home with thousands of files costs
nothing. Offline and read-only: model files are stat'ed, never read; bookkeeping (refs,
manifests, shard indexes) is read with a size bound. The walk is bounded twice: by depth in
user folders and by a budget of directory entries for the whole discovery. A directory is
entered once however many symlinks lead to it, so symlink loops end.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from modelmon.core.errors import ModelReferenceError, ReferenceSyntaxError
from modelmon.core.model.folder_models import FolderModel, folder_models
from modelmon.core.model.references import (
    HF_SCHEME,
    OLLAMA_SCHEME,
    HubReference,
    OllamaReference,
    parse_reference,
)
from modelmon.core.model.stores import (
    HUB_REPO_PREFIX,
    hub_cache_dir,
    hub_snapshot,
    llamacpp_cache_dirs,
    lmstudio_model_dirs,
    ollama_model_blob,
    ollama_model_dirs,
    user_model_dirs,
)
from modelmon.core.system.storage import StorageFacts, storage_facts

SOURCES = ("hf", "ollama", "lmstudio", "llamacpp", "folder")
MAX_ENTRIES = 100_000  # directory entries one discovery may visit, all places together
MAX_FOLDER_DEPTH = 4  # levels below a user folder that are searched


@dataclass(frozen=True, slots=True)
class DiscoveredModel:
    """One model found on disk; ``reference`` is what to give ``open_model`` or the CLI."""

    reference: str  # "hf:org/name", "hf:org/name/file.gguf", "ollama:llama3:8b" or a path
    name: str  # for people: "org/name", "llama3:8b", "publisher/repo/file.gguf"
    source: str  # one of SOURCES
    format: str  # "safetensors" | "gguf"
    files: tuple[str, ...]  # the weight files as the tool lays them out (may be symlinks)
    bytes: int  # their sizes, symlinks followed
    revision: str | None  # hub commit hash; Ollama model blob digest; None elsewhere
    path: str  # what the reference resolves to: a file, a shard index or a folder
    storage: StorageFacts | None  # where the first file's bytes live (None: could not tell)


@dataclass(frozen=True, slots=True)
class Discovery:
    models: tuple[DiscoveredModel, ...]  # sorted by source, then name
    searched: tuple[str, ...]  # the places that exist and were looked in
    skipped: tuple[str, ...]  # one line per model-like entry that is not usable, and why
    entries_visited: int  # directory entries read, all places together
    truncated: bool  # the entry budget ran out: some places were not fully searched


def discover_models(
    dirs: Iterable[str | os.PathLike[str]] = (),
    environ: Mapping[str, str] | None = None,
    max_entries: int = MAX_ENTRIES,
) -> Discovery:
    """Every model in the known stores, then in ``dirs`` and MODELMON_MODEL_DIRS."""
    walk = _Walk(max_entries)
    _scan_hub(walk, hub_cache_dir(environ))
    for store in ollama_model_dirs(environ):
        _scan_ollama(walk, store)
    for folder in lmstudio_model_dirs(environ):
        _scan_lmstudio(walk, folder)
    for folder in llamacpp_cache_dirs(environ):
        _scan_flat(walk, folder, "llamacpp")
    # User folders last: however big they are, the known stores were searched first.
    for folder in [*map(Path, dirs), *user_model_dirs(environ)]:
        _scan_folder(walk, folder)
    return Discovery(
        models=tuple(sorted(walk.models, key=lambda model: (model.source, model.name))),
        searched=tuple(walk.searched),
        skipped=tuple(walk.skipped),
        entries_visited=walk.visited,
        truncated=walk.truncated,
    )


# The stores discovery knows, as people name them.
KNOWN_STORES = "the Hugging Face cache, Ollama, LM Studio and llama.cpp"


def nothing_found(searched: int) -> str:
    """What a discovery that found no model says, after searching ``searched`` places (the
    CLI and the app say the same; each adds how to name a folder its own way)."""
    if searched == 0:
        return f"No models found: none of the places they are kept ({KNOWN_STORES}) exists here"
    return f"No models found in the {searched} place{'s' if searched != 1 else ''} searched"


class _Walk:
    """The state of one discovery: budget, directories entered, storage facts per device."""

    def __init__(self, max_entries: int) -> None:
        self.budget = max_entries
        self.visited = 0
        self.truncated = False
        self.entered: set[tuple[int, int]] = set()
        self.facts_by_device: dict[int, StorageFacts | None] = {}
        self.models: list[DiscoveredModel] = []
        self.listed_files: set[tuple[str, ...]] = set()
        self.searched: list[str] = []
        self.skipped: list[str] = []

    def enter(self, path: Path) -> bool:
        """True the first time a directory is reached, by whatever path or symlink."""
        try:
            status = os.stat(path)
        except OSError:
            return False
        key = (status.st_dev, status.st_ino)
        if not stat.S_ISDIR(status.st_mode) or key in self.entered:
            return False
        self.entered.add(key)
        return True

    def entries(self, folder: Path) -> list[os.DirEntry[str]]:
        """The folder's entries, as many as the budget allows; an unreadable folder has none."""
        found: list[os.DirEntry[str]] = []
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if self.visited >= self.budget:
                        self.truncated = True
                        break
                    self.visited += 1
                    found.append(entry)
        except OSError:
            pass
        return found

    def subfolders(self, folder: Path) -> list[tuple[str, Path]]:
        """(name, path) of the folder's subfolders not entered before, hidden ones left out."""
        found = []
        for entry in sorted(self.entries(folder), key=lambda entry: entry.name):
            if entry.name.startswith(".") or not _is_dir(entry):
                continue
            if self.enter(Path(entry.path)):
                found.append((entry.name, Path(entry.path)))
        return found

    def add(
        self, source: str, name: str, reference: str, found: FolderModel, revision: str | None
    ) -> None:
        real = tuple(os.path.realpath(file) for file in found.files)
        # A user folder that overlaps a store (or another user folder) lists nothing twice.
        if source == "folder" and tuple(sorted(real)) in self.listed_files:
            return
        self.listed_files.add(tuple(sorted(real)))
        self.models.append(
            DiscoveredModel(
                reference=reference,
                name=name,
                source=source,
                format=found.format,
                files=tuple(str(file) for file in found.files),
                bytes=found.bytes,
                revision=revision,
                path=str(found.path),
                storage=self.storage(real[0]),
            )
        )

    def storage(self, real_file: str) -> StorageFacts | None:
        """Storage facts, worked out once per filesystem (device) and not once per file."""
        try:
            device = os.stat(real_file).st_dev
        except OSError:
            return None
        if device not in self.facts_by_device:
            try:
                self.facts_by_device[device] = storage_facts(real_file)
            except OSError:
                self.facts_by_device[device] = None
        facts = self.facts_by_device[device]
        return None if facts is None else replace(facts, path=real_file)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _reference_or_path(reference: str, path: Path) -> str:
    """``reference`` when it parses back to itself, else the path (odd names on disk)."""
    try:
        parsed = parse_reference(reference)
    except ReferenceSyntaxError:
        return str(path)
    return reference if parsed is not None and str(parsed) == reference else str(path)


# --- the places --------------------------------------------------------------------------------


def _scan_hub(walk: _Walk, cache: Path) -> None:
    """``models--ORG--NAME/snapshots/COMMIT/``: the snapshot refs/main names, per repo."""
    if not walk.enter(cache):
        return
    walk.searched.append(str(cache))
    for entry in sorted(walk.entries(cache), key=lambda entry: entry.name):
        if not entry.name.startswith(HUB_REPO_PREFIX) or not _is_dir(entry):
            continue
        repo_dir = Path(entry.path)
        repo = "/".join(entry.name[len(HUB_REPO_PREFIX) :].split("--"))
        label = f"{HF_SCHEME}{repo}"
        try:
            snapshot = hub_snapshot(label, repo_dir, None)
        except ModelReferenceError as exc:
            walk.skipped.append(str(exc))
            continue
        if not walk.enter(snapshot.path):
            continue
        entries = walk.entries(snapshot.path)
        for found in folder_models(snapshot.path, entries, walk.skipped):
            file = None if found.opens_folder else found.path.relative_to(snapshot.path).as_posix()
            reference = _reference_or_path(str(HubReference(repo, None, file)), found.path)
            name = repo if file is None else f"{repo}/{file}"
            walk.add("hf", name, reference, found, snapshot.commit)


def _scan_ollama(walk: _Walk, store: Path) -> None:
    """``manifests/REGISTRY/NAMESPACE/NAME/TAG``: JSON whose model layer names a blob."""
    manifests = store / "manifests"
    if not walk.enter(store) or not walk.enter(manifests):
        return
    walk.searched.append(str(store))
    for registry, registry_dir in walk.subfolders(manifests):
        for namespace, namespace_dir in walk.subfolders(registry_dir):
            for name, name_dir in walk.subfolders(namespace_dir):
                for entry in sorted(walk.entries(name_dir), key=lambda entry: entry.name):
                    if entry.name.startswith(".") or _is_dir(entry):
                        continue
                    parts = OllamaReference(name, entry.name, namespace, registry)
                    label = _reference_or_path(str(parts), Path(entry.path))
                    try:
                        blob = ollama_model_blob(label, store, Path(entry.path))
                    except ModelReferenceError as exc:
                        walk.skipped.append(str(exc))
                        continue
                    found = FolderModel(blob.path, "gguf", (blob.path,), blob.size, False)
                    shown = label.removeprefix(OLLAMA_SCHEME)
                    reference = label if label.startswith(OLLAMA_SCHEME) else str(blob.path)
                    walk.add("ollama", shown, reference, found, blob.digest)


def _scan_lmstudio(walk: _Walk, models: Path) -> None:
    """``PUBLISHER/REPO/`` folders of GGUF (or safetensors) files."""
    if not walk.enter(models):
        return
    walk.searched.append(str(models))
    for publisher, publisher_dir in walk.subfolders(models):
        for repo, repo_dir in walk.subfolders(publisher_dir):
            for found in folder_models(repo_dir, walk.entries(repo_dir), walk.skipped):
                name = f"{publisher}/{repo}"
                if found.path != repo_dir:
                    name += f"/{found.path.name}"
                walk.add("lmstudio", name, str(found.path), found, None)


def _scan_flat(walk: _Walk, folder: Path, source: str) -> None:
    """A folder of model files, no subfolders (llama.cpp's download cache)."""
    if not walk.enter(folder):
        return
    walk.searched.append(str(folder))
    for found in folder_models(folder, walk.entries(folder), walk.skipped):
        walk.add(source, found.path.name, str(found.path), found, None)


def _scan_folder(walk: _Walk, root: Path) -> None:
    """A user's folder and its subfolders, MAX_FOLDER_DEPTH levels deep."""
    if not walk.enter(root):
        return
    walk.searched.append(str(root))
    pending = [(root, 0)]
    while pending:
        folder, depth = pending.pop()
        entries = walk.entries(folder)
        if depth < MAX_FOLDER_DEPTH:
            subfolders = sorted(
                (Path(e.path) for e in entries if not e.name.startswith(".") and _is_dir(e)),
                reverse=True,  # popped from the end: visited in name order
            )
            pending += [(path, depth + 1) for path in subfolders if walk.enter(path)]
        for found in folder_models(folder, entries, walk.skipped):
            relative = os.path.relpath(found.path, root)
            name = root.name if relative == "." else relative
            walk.add("folder", name, str(found.path), found, None)
