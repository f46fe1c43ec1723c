"""``modelmon strategies``: every registered strategy, one line each or as JSON."""

from __future__ import annotations

import json

from modelmon.core import STRATEGIES


def test_strategies_lists_every_strategy(modelmon) -> None:
    done = modelmon("strategies", "--json")
    names = [entry["name"] for entry in json.loads(done.stdout)]
    assert names == list(STRATEGIES)
    assert len(modelmon("strategies").stdout.strip().splitlines()) == len(STRATEGIES)
