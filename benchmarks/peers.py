"""Which other loaders run here: each is an entry of modelmon.core's one registry
(``ENGINES``), run by its one child harness, as ``recommend`` runs them."""

from __future__ import annotations

from modelmon.core.runs import get_engine, installed_knobs


def peer_unavailable(peer: str) -> str | None:
    """None when the loader imports here (its child asked what its version takes);
    otherwise the reason, in one line."""
    why = get_engine(peer).unavailable()
    if why is None:
        probe = installed_knobs([peer]).get(peer)
        why = probe.error if probe is not None else None
    return None if why is None else f"{why}; see benchmarks/README.md to install it"
