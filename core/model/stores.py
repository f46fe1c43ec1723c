"""Where other tools keep models, and how to read their bookkeeping without trusting it.

The Hugging Face hub cache, Ollama, LM Studio and llama.cpp each keep downloaded weights in a
folder of their own, laid out their own way. This module knows the folders (from the same
environment variables the tools read) and the two layouts that need more than a file name:
a hub snapshot (``refs/main`` names a commit; ``snapshots/COMMIT/`` holds symlinks into
``blobs/``) and an Ollama manifest (JSON naming the GGUF blob by digest).

Everything here is read-only and offline. Bookkeeping files (refs, manifests) are read with
``core.system.files.read_small_file`` (regular files of at most 1 MiB): a FIFO in their
place must not hang a scan, and a huge file must not fill RAM.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from modelmon.core.errors import ModelReferenceError
from modelmon.core.system.files import UnusableFile, parse_json, read_small_file

MAX_BOOKKEEPING_BYTES = 1 << 20
OLLAMA_MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"
# Where the Linux installer's system service keeps its models (user `ollama`).
OLLAMA_SYSTEM_MODELS = "/usr/share/ollama/.ollama/models"
HUB_REPO_PREFIX = "models--"

_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


# --- where the stores are ----------------------------------------------------------------------


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def home_dir(environ: Mapping[str, str] | None = None) -> Path:
    return Path(_env(environ).get("HOME") or os.path.expanduser("~"))


def _expand(value: str, environ: Mapping[str, str]) -> Path:
    if value == "~" or value.startswith("~/"):
        return home_dir(environ) / value[2:]
    return Path(value)


def _cache_home(environ: Mapping[str, str]) -> Path:
    xdg = environ.get("XDG_CACHE_HOME")
    return _expand(xdg, environ) if xdg else home_dir(environ) / ".cache"


def hub_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The hub cache, found as huggingface_hub finds it (HF_HUB_CACHE, then HF_HOME/hub...)."""
    env = _env(environ)
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(variable):
            return _expand(env[variable], env)
    if env.get("HF_HOME"):
        return _expand(env["HF_HOME"], env) / "hub"
    return _cache_home(env) / "huggingface" / "hub"


def ollama_model_dirs(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """OLLAMA_MODELS alone when set (as Ollama does), else the user's and the service's store."""
    env = _env(environ)
    if env.get("OLLAMA_MODELS"):
        return (_expand(env["OLLAMA_MODELS"], env),)
    return (home_dir(env) / ".ollama" / "models", Path(OLLAMA_SYSTEM_MODELS))


def lmstudio_model_dirs(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """LM Studio's models folder: ~/.lmstudio/models since 0.3, ~/.cache/lm-studio before."""
    home = home_dir(environ)
    return (home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models")


def llamacpp_cache_dirs(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """Where llama.cpp's ``-hf``/``--model-url`` downloads go (LLAMA_CACHE, else the cache)."""
    env = _env(environ)
    if env.get("LLAMA_CACHE"):
        return (_expand(env["LLAMA_CACHE"], env),)
    return (_cache_home(env) / "llama.cpp",)


def user_model_dirs(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The folders named in MODELMON_MODEL_DIRS, separated by os.pathsep."""
    env = _env(environ)
    text = env.get("MODELMON_MODEL_DIRS", "")
    return tuple(_expand(part, env) for part in text.split(os.pathsep) if part)


# --- Hugging Face hub snapshots ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HubSnapshot:
    commit: str  # the snapshot folder's name: a 40-hex commit hash
    path: Path  # .../models--org--name/snapshots/COMMIT


def hub_repo_dir(cache: Path, repo: str) -> Path:
    """``org/name`` → ``cache/models--org--name`` (repo ids never contain ``--``)."""
    return cache / (HUB_REPO_PREFIX + repo.replace("/", "--"))


def _snapshot_names(snapshots: Path) -> list[str]:
    try:
        with os.scandir(snapshots) as entries:
            return sorted(entry.name for entry in entries if entry.is_dir())
    except OSError:
        return []


def _read_ref(label: str, ref_file: Path) -> str:
    try:
        text = read_small_file(ref_file, MAX_BOOKKEEPING_BYTES).decode("ascii").strip()
    except UnusableFile as exc:
        raise ModelReferenceError(label, f"cannot read {ref_file}: {exc.reason}") from None
    except UnicodeDecodeError:
        text = ""
    if not _COMMIT.fullmatch(text):
        raise ModelReferenceError(label, f"{ref_file} does not hold a commit hash")
    return text


def hub_snapshot(label: str, repo_dir: Path, revision: str | None) -> HubSnapshot:
    """The snapshot ``revision`` names: a ref (``main`` when None), a commit or its prefix.

    ``label`` is the reference the user wrote; every ModelReferenceError starts with it.
    """
    if not repo_dir.is_dir():
        raise ModelReferenceError(
            label,
            f"not in the Hugging Face cache (no {repo_dir.name} in {repo_dir.parent}; "
            "HF_HUB_CACHE or HF_HOME name the cache when it is elsewhere)",
        )
    snapshots = repo_dir / "snapshots"
    ref_name = revision or "main"
    ref_file = repo_dir / "refs" / ref_name
    if os.path.lexists(ref_file):
        commit = _read_ref(label, ref_file)
        if not (snapshots / commit).is_dir():
            raise ModelReferenceError(
                label, f"refs/{ref_name} names {commit}, but {snapshots} has no such snapshot"
            )
        return HubSnapshot(commit, snapshots / commit)
    names = _snapshot_names(snapshots)
    if revision is None:
        # Downloads by commit hash write no refs/main; a single snapshot is unambiguous.
        if len(names) == 1:
            return HubSnapshot(names[0], snapshots / names[0])
        if not names:
            raise ModelReferenceError(label, f"no snapshot in {repo_dir} (looked for refs/main)")
        raise ModelReferenceError(
            label,
            f"no refs/main in {repo_dir} and {len(names)} snapshots; name one with "
            f"@REVISION: {', '.join(name[:12] for name in names[:4])}",
        )
    is_hex = re.fullmatch(r"[0-9a-fA-F]{4,40}", revision) is not None
    matches = [name for name in names if is_hex and name.startswith(revision.lower())]
    if len(matches) == 1:
        return HubSnapshot(matches[0], snapshots / matches[0])
    if len(matches) > 1:
        raise ModelReferenceError(
            label, f"revision {revision} is ambiguous in {snapshots}: {', '.join(matches[:4])}"
        )
    raise ModelReferenceError(
        label,
        f"no revision {revision} in {repo_dir} (looked for refs/{revision} and "
        f"snapshots/{revision}*)",
    )


def dangling_link(path: Path) -> str | None:
    """Where ``path`` points when it is a symlink to nothing (an interrupted download), else
    None."""
    if os.path.exists(path) or not os.path.islink(path):
        return None
    try:
        return os.readlink(path)
    except OSError:
        return "?"


# --- Ollama manifests --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OllamaBlob:
    digest: str  # "sha256:HEX", the model layer's digest
    path: Path  # STORE/blobs/sha256-HEX
    size: int


def ollama_manifest_path(store: Path, registry: str, namespace: str, name: str, tag: str) -> Path:
    return store / "manifests" / registry / namespace / name / tag


def ollama_model_blob(label: str, store: Path, manifest: Path) -> OllamaBlob:
    """The GGUF blob that ``manifest``'s model layer names, checked against its size."""
    try:
        document = parse_json(read_small_file(manifest, MAX_BOOKKEEPING_BYTES))
    except UnusableFile as exc:
        raise ModelReferenceError(label, f"cannot read manifest {manifest}: {exc.reason}") from None
    layers = document.get("layers") if isinstance(document, dict) else None
    if not isinstance(layers, list):
        raise ModelReferenceError(label, f"manifest {manifest} has no layers list")
    models = [
        layer
        for layer in layers
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_MEDIA_TYPE
    ]
    if len(models) != 1:
        raise ModelReferenceError(
            label,
            f"manifest {manifest} has {len(models)} layers of type {OLLAMA_MODEL_MEDIA_TYPE} "
            "(expected one)",
        )
    digest = models[0].get("digest")
    match = _SHA256_DIGEST.fullmatch(digest) if isinstance(digest, str) else None
    if match is None:
        raise ModelReferenceError(label, f"manifest {manifest}: model layer digest {digest!r}")
    blob = store / "blobs" / f"sha256-{match.group(1)}"
    try:
        status = os.stat(blob)
    except OSError:
        raise ModelReferenceError(
            label, f"blob {blob} named by {manifest} is missing (an interrupted pull?)"
        ) from None
    if not stat.S_ISREG(status.st_mode):
        raise ModelReferenceError(label, f"blob {blob} is not a regular file")
    declared = models[0].get("size")
    if isinstance(declared, int) and declared != status.st_size:
        raise ModelReferenceError(
            label,
            f"blob {blob} is {status.st_size} bytes, the manifest says {declared} "
            "(an interrupted pull?)",
        )
    return OllamaBlob(match.group(0), blob, status.st_size)
