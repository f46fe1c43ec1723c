"""Which peer loaders import here: the one implementation of peers is in modelmon.core
(``run_peer``, ``PEERS``), which ``recommend`` uses too."""

from __future__ import annotations

from modelmon.core import check_import


def peer_unavailable(peer: str) -> str | None:
    """None when the peer's library imports here; otherwise the reason, in one line."""
    why = check_import(peer)
    return None if why is None else f"{why}; see benchmarks/README.md to install it"
