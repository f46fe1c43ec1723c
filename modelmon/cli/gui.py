"""``modelmon gui`` (also ``modelmon``, ``modelmon FILE``, ``modelmon --demo``): the desktop app."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from modelmon.cli.common import PATH_HELP, ExitCode, add_verb, fail

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs

VERB = "gui"
EXAMPLES = """\
  modelmon gui                               the app (offers a demo model)
  modelmon model.safetensors                 the app on a model (gui is the default verb)
  modelmon gui hf:org/name
  modelmon --demo                            the app on the demo model
"""


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(verbs, VERB, "open the desktop app (the default)", EXAMPLES)
    parser.add_argument(
        "path", nargs="?", metavar="PATH", help=f"{PATH_HELP} (optional: the app offers a demo)"
    )
    parser.add_argument(
        "--demo", action="store_true", help="open the demo model (generated once into your cache)"
    )


def run(args: argparse.Namespace) -> int:
    if getattr(args, "install_desktop", False):
        return install_desktop()
    # Without a display Qt aborts with a core dump: say what to do instead.
    if sys.platform.startswith("linux") and not any(
        os.environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
    ):
        return fail(
            "no display for the app (DISPLAY and WAYLAND_DISPLAY are unset); run "
            "it under xvfb-run, or use a headless verb: modelmon inspect|load|bench|recommend",
            ExitCode.USAGE,
        )
    try:
        from modelmon.gui.app import run_app
    except ImportError as exc:  # e.g. Qt's system libraries are missing
        return fail(f"the app cannot start: {exc}", ExitCode.USAGE)
    # Without a verb there is no path argument: the app opens on nothing (or the demo).
    return run_app(getattr(args, "path", None), demo=bool(args.demo))


def install_desktop() -> int:
    """``modelmon --install-desktop``: needs no display, so it works over ssh too."""
    from modelmon.desktop import install_desktop as install

    for path in install():
        print(path)
    return ExitCode.OK
