"""Memory facts: the real machine, /proc/meminfo text and a fake cgroup tree."""

from __future__ import annotations

from pathlib import Path

from modelmon.core.system import memory
from modelmon.core.system.memory import parse_meminfo
from modelmon.core.system.storage import MountEntry


def test_parse_meminfo() -> None:
    values = parse_meminfo("MemTotal:       16384 kB\nCached:  2048 kB\nHugePages_Total: 0\n")
    assert values == {"MemTotal": 16384 * 1024, "Cached": 2048 * 1024, "HugePages_Total": 0}


def test_memory_facts_are_sane() -> None:
    facts = memory.memory_facts()
    assert facts.total > 0
    assert 0 < facts.available <= facts.total
    assert 0 <= facts.page_cache <= facts.total
    assert 0 <= facts.usable <= facts.available
    if facts.cgroup_limit is not None:
        assert facts.cgroup_used is not None and facts.usable <= facts.cgroup_limit


def cgroup_mount(mount_id: int, mount_point: Path, fs_type: str, options: str) -> MountEntry:
    return MountEntry(
        mount_id, 1, 0, mount_id, "/", str(mount_point), fs_type, "cgroup", "rw", options
    )


def test_cgroup_v2_limit_is_the_tightest_up_the_tree(tmp_path: Path) -> None:
    leaf = tmp_path / "user.slice" / "app"
    leaf.mkdir(parents=True)
    (tmp_path / "user.slice" / "memory.max").write_text("8000\n")
    (tmp_path / "user.slice" / "memory.current").write_text("1000\n")
    (tmp_path / "user.slice" / "memory.stat").write_text("anon 600\ninactive_file 400\n")
    (leaf / "memory.max").write_text("max\n")
    (leaf / "memory.current").write_text("500\n")
    mounts = [cgroup_mount(41, tmp_path, "cgroup2", "rw")]
    limit, used = memory.cgroup_memory(mounts, "0::/user.slice/app\n")
    assert (limit, used) == (8000, 600)  # usage minus reclaimable inactive file pages


def test_cgroup_v1_limit_and_unlimited(tmp_path: Path) -> None:
    leaf = tmp_path / "docker" / "abc"
    leaf.mkdir(parents=True)
    (leaf / "memory.limit_in_bytes").write_text("4096000\n")
    (leaf / "memory.usage_in_bytes").write_text("1000000\n")
    (leaf / "memory.stat").write_text("cache 10\ntotal_inactive_file 250000\n")
    mounts = [
        cgroup_mount(35, tmp_path, "cgroup", "rw,memory"),
        cgroup_mount(36, tmp_path / "x", "cgroup", "rw,cpu"),
    ]
    text = "4:memory:/docker/abc\n1:cpu:/\n"
    assert memory.cgroup_memory(mounts, text) == (4096000, 750000)
    (leaf / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert memory.cgroup_memory(mounts, text) == (None, None)
    assert memory.cgroup_memory([], text) == (None, None)


def test_cgroup_free_is_limit_minus_all_it_charges_up_the_tree(tmp_path: Path) -> None:
    leaf = tmp_path / "user.slice" / "app"
    leaf.mkdir(parents=True)
    (tmp_path / "user.slice" / "memory.max").write_text("8000\n")
    (tmp_path / "user.slice" / "memory.current").write_text("7000\n")  # page cache included
    (leaf / "memory.max").write_text("5000\n")
    (leaf / "memory.current").write_text("500\n")
    mounts = [cgroup_mount(41, tmp_path, "cgroup2", "rw")]
    assert memory.cgroup_free(mounts, "0::/user.slice/app\n") == 1000  # the parent's room
    (tmp_path / "user.slice" / "memory.max").write_text("max\n")
    assert memory.cgroup_free(mounts, "0::/user.slice/app\n") == 4500
    (leaf / "memory.max").write_text("max\n")
    assert memory.cgroup_free(mounts, "0::/user.slice/app\n") is None


def test_swap_and_hugepage_facts_of_this_machine() -> None:
    facts = memory.memory_facts()
    assert 0 <= facts.swap_used <= facts.swap_total
    mode = Path(memory.THP_ENABLED)
    if mode.exists():
        assert facts.hugepages in ("always", "madvise", "never")
        assert f"[{facts.hugepages}]" in mode.read_text()


def test_parse_bracketed() -> None:
    assert memory.parse_bracketed("always [madvise] never") == "madvise"
    assert memory.parse_bracketed("[always] madvise never\n") == "always"


def _facts(usable: int, swap_total: int, swap_used: int = 0) -> memory.MemoryFacts:
    return memory.MemoryFacts(
        total=4 * usable,
        available=usable,
        page_cache=0,
        cgroup_limit=None,
        cgroup_used=None,
        usable=usable,
        swap_total=swap_total,
        swap_used=swap_used,
    )


def test_swap_warning_when_model_and_its_cache_do_not_fit_and_there_is_swap() -> None:
    gib = 1 << 30
    assert memory.swap_warning(3 * gib, _facts(8 * gib, 4 * gib)) is None  # 6 GiB fits in 8
    warning = memory.swap_warning(5 * gib, _facts(8 * gib, 4 * gib, gib))
    assert warning is not None and "swap" in warning and "1.0 GiB of swap already" in warning
    assert "\n" not in warning
    assert memory.swap_warning(5 * gib, _facts(8 * gib, 0)) is None  # nowhere to swap to
    assert memory.swap_warning(5 * gib, _facts(8 * gib, 4 * gib), discard=True) is None
