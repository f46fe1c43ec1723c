"""The config file as text: its document (``output.config``) rendered as TOML with the
comments a value needs (TOML writers keep none), and written through the output guard,
atomically."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tomli_w

from modelmon.core.errors import ConfigError
from modelmon.core.output.json import redacted
from modelmon.core.system.outputs import check_output

# [evidence] cache where no run could start cold: nothing of a bucket is cached on this
# machine, and a file in RAM (tmpfs) cannot be dropped from it. Never called cold.
NOTHING_CACHED = "none: object storage, nothing of it cached on this machine"
IN_RAM = "in RAM: the file lives in memory (tmpfs) and cannot be made cold"


# Comments on keys of [recommended], by key and value: TOML writers keep no comments, so
# ``render`` adds them. Said where a value alone would mislead.
KEEP_COMMENT = (
    "# keep: a load leaves the page cache as it finds it. The evidence below was measured "
    "from a\n# verified {cache} cache: expect its figures when the model's pages are not "
    "cached (a fresh start)."
)
# The same where the runs asked for a state they did not all start from (a file in RAM
# cannot be made cold): the evidence is not said to be of that state.
KEEP_UNVERIFIED_COMMENT = (
    "# keep: a load leaves the page cache as it finds it. The evidence below asked for a "
    "{cache}\n# cache and did not always start from one (all_runs_verified = false): its "
    "figures\n# {missed}."
)
# The same where no run could start from a state asked for: a bucket's, a file in RAM's.
KEEP_STATE_COMMENTS = {
    NOTHING_CACHED: (
        "# keep: a load leaves the page cache as it finds it. The evidence below was measured "
        "with\n# nothing of the model cached on this machine (object storage): expect its "
        "figures on a fresh start."
    ),
    IN_RAM: (
        "# keep: a load leaves the page cache as it finds it. The evidence below was measured "
        "on a\n# file that lives in RAM (tmpfs), which cannot be made cold: its figures are of "
        "pages\n# already in memory, as every load of that file is."
    ),
}
APPLY_COMMENT = (
    "# Each value is pasted as it is; what measured it (or that nothing did) is in "
    "[apply_evidence]."
)
MISSED = {
    "cold": "include pages that were already in RAM",
    "warm": "include reads from the storage",
}


def render(document: Mapping[str, Any]) -> str:
    """The document as TOML, with comments where a value needs one."""
    text = tomli_w.dumps(redacted(dict(document)))
    evidence = document.get("evidence", {})
    evidence_cache = evidence.get("cache")
    verified = evidence.get("all_runs_verified", True)
    comment = KEEP_COMMENT if verified else KEEP_UNVERIFIED_COMMENT
    picked = document.get("recommendation", {}).get("apply")
    lines, section = [], ""
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip()
        if section == "[recommended]" and line == 'cache = "keep"' and evidence_cache:
            missed = MISSED.get(evidence_cache, "are not those of that state")
            said = KEEP_STATE_COMMENTS.get(evidence_cache)
            said = said or comment.format(cache=evidence_cache, missed=missed)
            lines.extend(said.splitlines())
        if line == "[apply]":
            lines.append(APPLY_COMMENT)
        if section == "[apply]" and picked and line.split("=", 1)[0].strip(' "') == picked:
            lines.append("# ↓ the line that does what the pick does ([recommendation] apply)")
        lines.append(line)
    return "\n".join(lines) + "\n"


def write_config(
    path: str | os.PathLike[str],
    document: Mapping[str, Any],
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write through the guard (``modelmon.core.system.outputs``; ``inputs``: the files of
    the model measured), atomically: the old file survives any failure."""
    output = check_output(path, inputs, ConfigError)
    output.write(render(document).encode(), ConfigError)
    return output.path or Path(os.fspath(path))
