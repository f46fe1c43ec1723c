"""Which cgroup directories hold this process, for one controller: the innermost first, up to
the hierarchy's root, on cgroup v1 (the controller's own hierarchy) or v2 (the unified one).
A limit anywhere on that path applies to the process, as a container's limits do."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelmon.core.system.storage import MountEntry

# Per controller: the v1 hierarchy's name, and a file of it (v1, v2) that only a hierarchy
# with the controller has.
CONTROLLERS = {
    "memory": ("memory", "memory.limit_in_bytes", "memory.max"),
    "io": ("blkio", "blkio.throttle.read_bps_device", "io.max"),
}


def cgroup_dirs(
    mounts: list[MountEntry], cgroup_text: str, controller: str = "memory"
) -> list[tuple[Path, int]]:
    """Our cgroup dirs of ``controller`` (``memory`` or ``io``), innermost first, each with
    its version (1 or 2), from mountinfo's entries and /proc/self/cgroup's text."""
    v1_name, v1_probe, v2_probe = CONTROLLERS[controller]
    for line in cgroup_text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, cgroup_path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            version, wanted = 2, [m for m in mounts if m.fs_type == "cgroup2"]
        elif v1_name in controllers.split(","):
            version = 1
            wanted = [
                m for m in mounts if m.fs_type == "cgroup" and v1_name in m.super_options.split(",")
            ]
        else:
            continue
        for mount in wanted:
            # Inside a cgroup namespace the path is relative to the mount's root.
            relative = os.path.relpath(cgroup_path or "/", mount.root)
            base = Path(mount.mount_point)
            leaf = base / relative if not relative.startswith("..") else base
            if not leaf.is_dir():
                leaf = base
            dirs = [leaf, *[p for p in leaf.parents if p.is_relative_to(base)]]
            probe = v2_probe if version == 2 else v1_probe
            if any((d / probe).exists() for d in dirs):
                return [(d, version) for d in dirs]
    return []
