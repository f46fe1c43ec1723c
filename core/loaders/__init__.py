"""Loaders that are not modelmon's own: one registry of them (``registry``: what each loads,
what must be installed, its knobs, the line a user pastes) and one child harness that runs
any of them in a fresh process that never imports modelmon (``child.py``, run by path), and
asks what the installed version takes (``installed``)."""
