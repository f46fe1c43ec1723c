"""The machine: storage and memory facts, memory limits, the page cache (cold, evicted,
resident), readahead, host memory priming, this process's own figures, and the output
guard (``check_output`` / ``write_or_keep``) every file modelmon writes passes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelmon.core.faces import face

if TYPE_CHECKING:
    from modelmon.core.system.cache import evict
    from modelmon.core.system.cache import not_measured as cache_not_measured
    from modelmon.core.system.cache import prepare as prepare_cache
    from modelmon.core.system.host_memory import (
        FREE_WORTH_NOTING,
        RETURNS_FREE_MEMORY,
        Primed,
        prime_mode,
        set_prime_mode,
    )
    from modelmon.core.system.memory import (
        check_memory_limit,
        max_memory_limit,
        memory_facts,
        memory_limit_range,
        swap_warning,
    )
    from modelmon.core.system.memory_cgroup import limit_unavailable as memory_limit_unavailable
    from modelmon.core.system.memory_limit import MemoryLimit
    from modelmon.core.system.memory_limit import ways_under as memory_limit_ways
    from modelmon.core.system.outputs import (
        Output,
        Saved,
        check_output,
        free_name,
        kept_answer_path,
        state_home,
        write_or_keep,
    )
    from modelmon.core.system.proc_status import own_status_bytes
    from modelmon.core.system.readahead import locate as locate_readahead
    from modelmon.core.system.readahead import recover as recover_readahead
    from modelmon.core.system.readahead import unavailable as readahead_unavailable
    from modelmon.core.system.residency import residency_of
    from modelmon.core.system.storage import storage_by_folder, storage_facts
    from modelmon.core.system.storage_rest import rest_storage

_EXPORTS = (
    ("modelmon.core.system.storage", "storage_facts storage_by_folder"),
    (
        "modelmon.core.system.memory",
        "memory_facts swap_warning check_memory_limit memory_limit_range max_memory_limit",
    ),
    ("modelmon.core.system.memory_cgroup", "memory_limit_unavailable=limit_unavailable"),
    ("modelmon.core.system.memory_limit", "MemoryLimit memory_limit_ways=ways_under"),
    (
        "modelmon.core.system.cache",
        "prepare_cache=prepare cache_not_measured=not_measured evict",
    ),
    ("modelmon.core.system.storage_rest", "rest_storage"),
    (
        "modelmon.core.system.readahead",
        "locate_readahead=locate readahead_unavailable=unavailable recover_readahead=recover",
    ),
    (
        "modelmon.core.system.host_memory",
        "prime_mode set_prime_mode Primed RETURNS_FREE_MEMORY FREE_WORTH_NOTING",
    ),
    ("modelmon.core.system.residency", "residency_of"),
    ("modelmon.core.system.proc_status", "own_status_bytes"),
    (
        "modelmon.core.system.outputs",
        "check_output write_or_keep Output Saved free_name state_home kept_answer_path",
    ),
)
__all__, __getattr__, __dir__ = face("modelmon.core.system", _EXPORTS, globals())
