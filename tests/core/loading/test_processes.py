"""How a worker that ended early is described: its signal, and whether the OOM killer did it."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from modelmon.core.loading.processes import death_description, oom_kills


def test_a_sigkill_is_put_down_to_the_oom_killer_only_when_it_acted(tmp_path: Path) -> None:
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("pgfault 100\noom_kill 7\npgmajfault 3\n")
    assert oom_kills(str(vmstat)) == 7
    assert oom_kills(str(tmp_path / "none")) is None
    now = oom_kills()
    if now is None:
        pytest.skip("this kernel does not count OOM kills in /proc/vmstat")
    assert "OOM killer ended it" in death_description(-signal.SIGKILL, now - 1)
    assert "not by the kernel's OOM killer" in death_description(-signal.SIGKILL, now)
    assert death_description(-signal.SIGKILL, None) == "was killed by SIGKILL: out of memory?"
    assert death_description(-signal.SIGSEGV, now) == "was killed by SIGSEGV"
    assert death_description(3, now) == "exited with code 3 before finishing"
