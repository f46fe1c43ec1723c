"""Findings of a watch under a memory limit: the page cache charged, re-reads, an OOM kill,
each in the loader's terms and with a bigger limit said by how much where it is known."""

from __future__ import annotations

import dataclasses
import json

from modelmon.core.output.json import dumps
from modelmon.core.system.memory_limit import MemoryLimit
from modelmon.core.watching import findings as rules
from modelmon.core.watching.loaders import Loader

from .test_findings import GB, a_file, a_result, codes

MiB = 1 << 20
LIMIT = 1500 * MiB
FITS = MemoryLimit(
    limit_bytes=LIMIT,
    peak_bytes=1400 * MiB,
    anon_peak_bytes=1100 * MiB,
    cache_peak_bytes=300 * MiB,
    mapped_peak_bytes=0,
    anon_at_peak_bytes=1100 * MiB,
    cache_at_peak_bytes=300 * MiB,
    reread_bytes=0,
    oom_killed=False,
    oom_kills=0,
    limit_hits=0,
    pressure_stall_s=None,
    cgroup="/sys/fs/cgroup/memory/modelmon-1-2-0",
    version=1,
)
LOCAL = a_file(path="/models/m.gguf", slow_storage=None, storage="ext4", fs_type="ext4")


def test_a_load_that_fits_its_limit_has_no_memory_finding() -> None:
    assert codes(a_result((LOCAL,), memory_limit=FITS)) == []
    assert codes(a_result((LOCAL,))) == []  # no limit, no word of one


def test_cache_charged_when_the_page_cache_took_most_of_the_limit() -> None:
    cached = dataclasses.replace(FITS, cache_peak_bytes=1000 * MiB)
    (found,) = rules.findings(a_result((LOCAL,), memory_limit=cached))
    assert found.code == "cache-charged"
    assert "1000 MiB of the 1500 MiB memory limit (67%)" in found.text
    assert "--load-mode dio" in found.fix  # llama.cpp's terms


def test_re_read_says_how_much_and_the_limit_that_holds_it() -> None:
    reread = dataclasses.replace(FITS, reread_bytes=310_000_000)
    (found,) = rules.findings(a_result((LOCAL,), memory_limit=reread))
    assert found.code == "re-read"
    assert "read 310.00 MB of the model again (31% of its 1.00 GB)" in found.text
    assert "--load-mode none" in found.fix  # mapped: read instead of faults
    # the anonymous peak and the model, with headroom, in 64 MiB steps
    assert "a limit of 2.1 GiB (--memory-limit 2176Mi) holds it all" in found.fix


def test_oom_killed_names_the_limit_and_what_held_it() -> None:
    killed = dataclasses.replace(FITS, oom_killed=True, oom_kills=1, peak_bytes=LIMIT)
    transformers = Loader("transformers", "transformers", ())
    result = a_result((LOCAL,), memory_limit=killed, loader=transformers)
    (found,) = rules.findings(result)
    assert found.code == "oom-killed"
    assert "at the memory limit of 1500 MiB (peak 1.5 GiB: 1.1 GiB anonymous" in found.text
    assert "low_cpu_mem_usage=True" in found.fix and "a limit above 1500 MiB" in found.fix
    data = json.loads(dumps(dataclasses.replace(result, findings=(found,)).to_dict()))
    assert data["memory_limit"]["oom_killed"] is True
    assert data["memory_limit"]["limit_bytes"] == LIMIT
    assert data["findings"][0]["evidence"]["oom_kills"] == 1
    assert data["model_bytes"] == GB
