"""Model references: what a user may name instead of a path.

``hf:ORG/NAME[@REVISION][/FILE]``
    a model in the Hugging Face hub cache. REVISION is a ref (``main`` by default), a commit
    hash or a prefix of one; FILE picks one file of the snapshot (one GGUF quantization of
    several, or one of several shard indexes).
``ollama:NAME[:TAG]``
    a model pulled by Ollama. NAME may be ``NAMESPACE/NAME`` or ``REGISTRY/NAMESPACE/NAME``
    (``hf.co/org/repo``); the defaults are ``registry.ollama.ai``, ``library`` and ``latest``.

Any other text is a path. A file whose name starts with ``hf:`` is still reachable as
``./hf:...``. Path objects are always paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from modelmon.core.errors import ModelReferenceError, ReferenceSyntaxError
from modelmon.core.model.stores import (
    dangling_link,
    hub_cache_dir,
    hub_repo_dir,
    hub_snapshot,
    ollama_manifest_path,
    ollama_model_blob,
    ollama_model_dirs,
)

HF_SCHEME = "hf:"
OLLAMA_SCHEME = "ollama:"
HF_SYNTAX = "hf:ORG/NAME[@REVISION][/FILE]"
OLLAMA_SYNTAX = "ollama:[[REGISTRY/]NAMESPACE/]NAME[:TAG]"
OLLAMA_REGISTRY = "registry.ollama.ai"
OLLAMA_NAMESPACE = "library"
OLLAMA_TAG = "latest"
# Suffixes of the files a snapshot's model is made of (checked for dangling blob links).
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".safetensors.index.json")

# huggingface_hub's own rule for repo ids: word characters, '.', '-'; no '--' or '..'.
_HUB_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?")
_REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")
_OLLAMA_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")
_OLLAMA_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


@dataclass(frozen=True, slots=True)
class HubReference:
    repo: str  # "org/name"
    revision: str | None = None  # None: whatever refs/main names
    file: str | None = None  # a path inside the snapshot; None: the snapshot folder

    def __str__(self) -> str:
        revision = f"@{self.revision}" if self.revision else ""
        file = f"/{self.file}" if self.file else ""
        return f"{HF_SCHEME}{self.repo}{revision}{file}"


@dataclass(frozen=True, slots=True)
class OllamaReference:
    name: str
    tag: str = OLLAMA_TAG
    namespace: str = OLLAMA_NAMESPACE
    registry: str = OLLAMA_REGISTRY

    def __str__(self) -> str:
        """The shortest spelling, as ``ollama list`` shows it, tag always included."""
        if self.registry != OLLAMA_REGISTRY:
            return f"{OLLAMA_SCHEME}{self.registry}/{self.namespace}/{self.name}:{self.tag}"
        if self.namespace != OLLAMA_NAMESPACE:
            return f"{OLLAMA_SCHEME}{self.namespace}/{self.name}:{self.tag}"
        return f"{OLLAMA_SCHEME}{self.name}:{self.tag}"


ModelReference = HubReference | OllamaReference


def is_reference(text: str) -> bool:
    return text.startswith((HF_SCHEME, OLLAMA_SCHEME))


def parse_reference(text: str) -> ModelReference | None:
    """The reference ``text`` spells, None for a plain path; ReferenceSyntaxError if malformed."""
    if text.startswith(HF_SCHEME):
        return _parse_hub(text)
    if text.startswith(OLLAMA_SCHEME):
        return _parse_ollama(text)
    return None


def _parse_hub(text: str) -> HubReference:
    parts = text[len(HF_SCHEME) :].split("/", 2)
    if len(parts) < 2:
        raise ReferenceSyntaxError(text, HF_SYNTAX)
    org, name_and_revision = parts[0], parts[1]
    name, at, revision = name_and_revision.partition("@")
    file = parts[2] if len(parts) == 3 else None
    valid = (
        all(_HUB_PART.fullmatch(part) and ".." not in part for part in (org, name))
        and "--" not in f"{org}/{name}"
        and (not at or (_REVISION.fullmatch(revision) and ".." not in revision))
        and (file is None or _is_relative_file(file))
    )
    if not valid:
        raise ReferenceSyntaxError(text, HF_SYNTAX)
    return HubReference(f"{org}/{name}", revision or None, file)


def _is_relative_file(file: str) -> bool:
    parts = file.split("/")
    return all(part not in ("", ".", "..") and "\0" not in part for part in parts)


def _parse_ollama(text: str) -> OllamaReference:
    body = text[len(OLLAMA_SCHEME) :]
    path, colon, tag = body.rpartition(":") if ":" in body.rpartition("/")[2] else (body, "", "")
    parts = path.split("/")
    valid = (
        1 <= len(parts) <= 3
        and all(_OLLAMA_PART.fullmatch(part) and ".." not in part for part in parts)
        and (not colon or _OLLAMA_TAG.fullmatch(tag))
    )
    if not valid:
        raise ReferenceSyntaxError(text, OLLAMA_SYNTAX)
    registry, namespace = OLLAMA_REGISTRY, OLLAMA_NAMESPACE
    if len(parts) == 3:
        registry, namespace = parts[0], parts[1]
    elif len(parts) == 2:
        namespace = parts[0]
    return OllamaReference(parts[-1], tag or OLLAMA_TAG, namespace, registry)


# --- resolution --------------------------------------------------------------------------------


def resolve_reference(text: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """The path a reference names (file or folder), None when ``text`` is a plain path.

    Raises ReferenceSyntaxError for a malformed reference and ModelReferenceError, one line
    saying what was looked for and where, for one that names nothing usable.
    """
    reference = parse_reference(text)
    if isinstance(reference, HubReference):
        return resolve_hub_reference(reference, environ, label=text)
    if isinstance(reference, OllamaReference):
        return resolve_ollama_reference(reference, environ, label=text)
    return None


def resolve_hub_reference(
    reference: HubReference, environ: Mapping[str, str] | None = None, label: str | None = None
) -> Path:
    """The snapshot folder, or the file in it, that ``reference`` names. Errors start with
    ``label``, the reference as the user wrote it (default: its canonical spelling)."""
    label = label or str(reference)
    repo_dir = hub_repo_dir(hub_cache_dir(environ), reference.repo)
    snapshot = hub_snapshot(label, repo_dir, reference.revision)
    if reference.file is not None:
        target = snapshot.path / reference.file
        _refuse_dangling(label, target, snapshot.commit)
        if not os.path.lexists(target):
            raise ModelReferenceError(label, f"no {reference.file} in snapshot {snapshot.path}")
        return target
    try:
        with os.scandir(snapshot.path) as entries:
            weights = sorted(e.name for e in entries if e.name.endswith(WEIGHT_SUFFIXES))
    except OSError as exc:
        raise ModelReferenceError(label, f"{snapshot.path}: {exc.strerror or exc}") from None
    for name in weights:
        _refuse_dangling(label, snapshot.path / name, snapshot.commit)
    ggufs = [name for name in weights if name.endswith(".gguf")]
    if len(ggufs) > 1 and len(ggufs) == len(weights):
        # Several quantizations of one model: each is a model of its own, named by its file.
        names = ", ".join(str(replace(reference, file=name)) for name in ggufs[:4])
        raise ModelReferenceError(
            label, f"{len(ggufs)} GGUF files in snapshot {snapshot.commit[:12]}; name one: {names}"
        )
    return snapshot.path


def _refuse_dangling(label: str, path: Path, commit: str) -> None:
    target = dangling_link(path)
    if target is not None:
        raise ModelReferenceError(
            label,
            f"{path.name} in snapshot {commit[:12]} points to a missing blob "
            f"({os.path.normpath(path.parent / target)}; an interrupted download?)",
        )


def resolve_ollama_reference(
    reference: OllamaReference, environ: Mapping[str, str] | None = None, label: str | None = None
) -> Path:
    """The GGUF blob the reference's manifest names; errors start with ``label``."""
    label = label or str(reference)
    stores = ollama_model_dirs(environ)
    parts = (reference.registry, reference.namespace, reference.name, reference.tag)
    for store in stores:
        manifest = ollama_manifest_path(store, *parts)
        if os.path.lexists(manifest):
            return ollama_model_blob(label, store, manifest).path
    known = [tag for store in stores for tag in _tags(ollama_manifest_path(store, *parts).parent)]
    looked = " or ".join(str(store / "manifests") for store in stores)
    if known:
        problem = f"no tag {reference.tag} in {looked} (tags: {', '.join(sorted(set(known)))})"
    else:
        problem = f"no manifest {'/'.join(parts)} in {looked}"
    raise ModelReferenceError(label, problem)


def _tags(model_dir: Path, limit: int = 12) -> list[str]:
    try:
        with os.scandir(model_dir) as entries:
            return [entry.name for _, entry in zip(range(limit), entries, strict=False)]
    except OSError:
        return []
