"""What a config file was measured on: the model's identity and the kind of storage it sat on.

Recorded in the config's ``[identity]`` table when it is written; compared when the config is
applied (``loading.config_file.apply_config``). A config measured on one
model or storage says little about another, so a difference is a warning
(``ConfigMismatchWarning``, one line naming what differs), never a failure: the options still
apply. Only metadata is compared (names, sizes, mtimes, tensor count, storage kind): reading
file bytes here would warm the page cache of the load it precedes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from modelmon.core.errors import ConfigError, ConfigMismatchWarning, warn
from modelmon.core.model.records import Model, ModelFile
from modelmon.core.system.storage import StorageFacts, storage_facts

MTIME_SLACK_S = 1.0  # filesystems and HTTP-backed mounts keep mtimes to the second
SHOWN_DIFFERENCES = 3  # more would not fit one line


def storage_kind(facts: StorageFacts) -> str:
    """The kind of storage ("fuse", "network" or "local"): what decides which strategy wins."""
    return "fuse" if facts.is_fuse else "network" if facts.is_network else "local"


def model_identity(model: Model) -> dict[str, Any]:
    """The ``[identity]`` table: tensor bytes and count, storage kind, every file's name,
    size and mtime."""
    remote = model.files[0].remote
    if remote is not None:  # a bucket: its storage ("s3", "https") stands for a file system
        storage, fs_type = "object", remote.storage
    else:
        facts = storage_facts(model.files[0].path)
        storage, fs_type = storage_kind(facts), facts.fs_type
    return {
        "tensor_bytes": model.total_bytes,
        "tensors": len(model.extents),
        "storage": storage,
        "fs_type": fs_type,
        "files": [
            {"name": Path(f.path).name, "size": f.size, "mtime": round(_mtime(f), 3)}
            for f in model.files
        ],
    }


def _mtime(file: ModelFile) -> float:
    """A file's mtime, or an object's last-modified (0 where the server gave none)."""
    if file.remote is None:
        return os.stat(file.path).st_mtime
    stamp = file.remote.last_modified
    return datetime.fromisoformat(stamp).timestamp() if stamp else 0.0


def differences(recorded: dict[str, Any], model: Model) -> list[str]:
    """What differs between the recorded identity and ``model`` as it is now (empty: same)."""
    found: list[str] = []
    here = model_identity(model)
    for key, what in (("tensors", "tensors"), ("tensor_bytes", "tensor bytes")):
        if key in recorded and recorded[key] != here[key]:
            found.append(f"{what} {recorded[key]:,} → {here[key]:,}")
    for key in ("storage", "fs_type"):
        if key in recorded and recorded[key] != here[key]:
            found.append(f"{key.replace('_', ' ')} {recorded[key]} → {here[key]}")
    if "files" in recorded:
        then = {f["name"]: f for f in recorded["files"]}
        now = {f["name"]: f for f in here["files"]}
        for name in sorted(then.keys() - now.keys()):
            found.append(f"file {name} missing")
        for name in sorted(now.keys() - then.keys()):
            found.append(f"file {name} not in the config")
        for name in sorted(then.keys() & now.keys()):
            old, new = then[name], now[name]
            if old["size"] != new["size"]:
                found.append(f"{name} size {old['size']:,} → {new['size']:,}")
            elif abs(old["mtime"] - new["mtime"]) > MTIME_SLACK_S:
                found.append(f"{name} modified since")
    return found


def warn_if_different(config_path: str, recorded: dict[str, Any] | None, model: Model) -> None:
    """One ``ConfigMismatchWarning`` line when ``model`` is not what the config measured."""
    if not recorded:
        return  # a config written before identities were recorded
    found = differences(recorded, model)
    if not found:
        return
    shown = "; ".join(found[:SHOWN_DIFFERENCES])
    more = f" (+{len(found) - SHOWN_DIFFERENCES} more)" if len(found) > SHOWN_DIFFERENCES else ""
    warn(
        f"{config_path} was measured on a different model or storage ({shown}{more}): "
        "its options apply, its figures may not",
        ConfigMismatchWarning,
    )


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


# The [identity] table's keys: checked with every other table of the file (config.SCHEMA).
IDENTITY_KEYS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "tensor_bytes": (_count, "a byte count"),
    "tensors": (_count, "a tensor count"),
    "storage": (
        lambda v: v in ("fuse", "network", "local", "object"),
        "fuse, network, local or object",
    ),
    "fs_type": (lambda v: isinstance(v, str), "a filesystem type"),
    "files": (lambda v: isinstance(v, list), "a list of files"),
}


def validate_identity(table: dict[str, Any], fail: Callable[[str, str], ConfigError]) -> None:
    """Check each entry of ``[identity].files`` (the table's own keys are checked by
    ``config.validate`` against ``IDENTITY_KEYS``): one clear line naming the entry at fault."""
    for number, file in enumerate(table.get("files", []), 1):
        ok = (
            isinstance(file, dict)
            and set(file) == {"name", "size", "mtime"}
            and isinstance(file["name"], str)
            and _count(file["size"])
            and isinstance(file["mtime"], int | float)
        )
        if not ok:
            raise fail(f"identity.files[{number}]", "must have a name, a size and an mtime")
