"""``--prime-memory``: whether the verbs that measure loads (``load``, ``bench``, ``recommend``)
prime free memory first, as ``modelmon.core.system.host_memory`` describes."""

from __future__ import annotations

import argparse

from modelmon.core.options import PRIME_MODES

HELP = (
    "touch the memory a load's arrays will take just before it starts, so that a VM's host "
    "that took freed memory back faults it in outside the timing (at most half the memory "
    "available, never under memory pressure): auto where such a host is seen (default), on "
    "wherever, off never"
)


def add_prime_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prime-memory", choices=PRIME_MODES, default="auto", help=HELP)


def apply_prime_option(args: argparse.Namespace) -> None:
    """Make the verb's ``--prime-memory`` this process's priming mode."""
    from modelmon.core.system import set_prime_mode

    set_prime_mode(args.prime_memory)
