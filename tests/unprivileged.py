"""Checks of what file permissions refuse, run where they refuse even on a root test machine.

Root reads and writes files whatever their modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
a test of "permission denied" skipped as root would never run on the project's machines.
As root, the check runs in a child without those two capabilities (``setpriv`` drops them
from its bounding and inheritable sets, the two that make up what root gets at exec); as
anyone else, as it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

DROPPED = "-dac_override,-dac_read_search"


def run_unprivileged(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -c code args...`` where file modes hold; its result (the code asserts)."""
    argv = [sys.executable, "-c", code, *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip(
                "as root, a permission test needs setpriv (util-linux) to drop its override"
            )
        argv = [setpriv, f"--bounding-set={DROPPED}", f"--inh-caps={DROPPED}", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
