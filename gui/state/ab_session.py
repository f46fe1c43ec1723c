"""What an A/B starts from: one cache state for both sides, read from A's and B's own Cache
setting (the one place it is set). Qt-free."""

from __future__ import annotations

from modelmon.core.errors import OptionsError
from modelmon.core.options import LoadOptions


def ab_cache(a: LoadOptions, b: LoadOptions) -> str:
    """The cache state every run of the A/B starts from: A's and B's, which must agree.

    An A/B compares loads from the same verified state; sides that start from different
    states would measure the cache, not the strategies.
    """
    if a.cache != b.cache:
        raise OptionsError(
            f"A/B needs one cache state for both sides: A is {a.cache!r}, B is {b.cache!r}; "
            "set the same Cache in both configurations"
        )
    return a.cache
