"""Other loaders ("peers") for the benchmarks: the one implementation is in modelmon.core.

``modelmon.core.measuring.peers`` runs each peer in a fresh child process, cold, timing every
byte; ``recommend`` measures peers as candidates with the same code.
"""

from __future__ import annotations

from modelmon.core import PEERS, PeerResult, check_import, run_peer


def peer_unavailable(peer: str) -> str | None:
    """None when the peer's library imports here; otherwise the reason, in one line."""
    why = check_import(peer)
    return None if why is None else f"{why}; see benchmarks/README.md to install it"


__all__ = ["PEERS", "PeerResult", "peer_unavailable", "run_peer"]
