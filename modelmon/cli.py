from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from modelmon.core.cli import main as core_main

    return core_main(argv)
