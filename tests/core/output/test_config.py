"""Config files: validated reads (one line naming the key) and atomic writes."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelmon.core.errors import ConfigError
from modelmon.core.loading.config_file import FORMAT_VERSION, read_config
from modelmon.core.options import LoadOptions
from modelmon.core.output import config as config_module
from modelmon.core.output.config_text import write_config

from ...unprivileged import run_unprivileged

GOOD = """format_version = 1
explanation = ["Best: sequential."]
[model]
path = "m.safetensors"
bytes = 10
format = "safetensors"
[recommended]
strategy = "sequential"
workers = 4
chunk = "16MiB"
fadvise = "sequential"
[evidence]
runs = 3
median_mbps = 1000.5
[[alternatives]]
rank = 2
strategy = "mmap"
spec = "mmap workers=4"
median_mbps = 800.0
runs = 1
[apply]
vllm = "vllm serve PATH --safetensors-load-strategy eager"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "modelmon.toml"
    path.write_text(text)
    return path


def test_good_config_reads_back(tmp_path: Path) -> None:
    config = read_config(write(tmp_path, GOOD))
    assert config.strategy == "sequential"
    assert config.options == LoadOptions(workers=4, chunk=16 << 20, fadvise="sequential")
    # Why a loader has no [apply] line (vLLM's, for weights alone) is read back as written.
    left_out = GOOD + '[apply_left_out]\nservers = "No vLLM or SGLang line: weights alone."\n'
    said = read_config(write(tmp_path, left_out)).document["apply_left_out"]
    assert said == {"servers": "No vLLM or SGLang line: weights alone."}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("format_version = 1\n[recommended\nstrategy = 1", "not valid TOML"),
        (
            GOOD.replace('strategy = "sequential"', 'strategy = "teleport"', 1),
            "recommended.strategy",
        ),
        (GOOD.replace("workers = 4", "workers = -2"), "recommended.workers"),
        (GOOD.replace("format_version = 1", "format_version = 7"), "format_version"),
        (GOOD.replace("format_version = 1\n", ""), "format_version"),
        (GOOD.replace("workers = 4", "wokers = 4"), "recommended.wokers: unknown key"),
        (GOOD.replace("[evidence]", "[evidence]\nspeed = 3"), "evidence.speed: unknown key"),
        (GOOD.replace("runs = 3", 'runs = "three"'), "evidence.runs"),
        (GOOD.replace('chunk = "16MiB"', 'chunk = "lots"'), "recommended.chunk"),
        (GOOD.replace('fadvise = "sequential"', 'fadvise = "fast"'), "recommended.fadvise"),
        (GOOD + "\n[extras]\nx = 1\n", "extras: unknown key"),
        (GOOD.replace("rank = 2", "rank = 2\ncolour = 1"), "alternatives[1].colour"),
        (GOOD.replace('format = "safetensors"', 'format = "pickle"'), "model.format"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        read_config(path)
    message = str(caught.value)
    assert key in message and str(path) in message and "\n" not in message


def test_missing_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        read_config(tmp_path / "nope.toml")


DOCUMENT = {"format_version": FORMAT_VERSION, "recommended": {"strategy": "pread"}}


def test_write_is_atomic_when_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "modelmon.toml"
    target.write_text(GOOD)

    def crash(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(config_module.os, "fsync", crash)  # dies mid-write, before the rename
    with pytest.raises(ConfigError, match="previous file kept") as caught:
        write_config(target, DOCUMENT)
    assert "\n" not in str(caught.value)
    assert target.read_text() == GOOD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["modelmon.toml"]  # no temp left


def test_write_interrupted_by_a_signal_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "modelmon.toml"
    target.write_text(GOOD)

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(config_module.os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_config(target, DOCUMENT)
    assert target.read_text() == GOOD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["modelmon.toml"]


@contextlib.contextmanager
def tmpfs(folder: Path, options: str) -> Iterator[Path]:
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "modelmon-test", str(folder)],
        capture_output=True,
        check=False,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_full_disk_keeps_the_previous_file(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "size=64k") as folder:
        target = folder / "modelmon.toml"
        target.write_text(GOOD)
        # Fill the disk; closing the filler fails too (its last buffer has nowhere to go).
        with contextlib.suppress(OSError), open(folder / "filler", "wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        big = {**DOCUMENT, "explanation": ["x" * 200_000]}
        with pytest.raises(ConfigError, match=r"previous file kept|cannot write here"):
            write_config(target, big)
        assert target.read_text() == GOOD


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_read_only_filesystem_is_one_clear_line(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "ro") as folder:
        with pytest.raises(ConfigError, match="cannot write here") as caught:
            write_config(folder / "modelmon.toml", DOCUMENT)
        assert "Read-only" in str(caught.value)


# DOCUMENT, written into a folder its modes make read-only.
READ_ONLY_WRITE = f"""
import sys
from modelmon.core.errors import ConfigError
from modelmon.core.output.config_text import write_config
try:
    write_config(sys.argv[1], {DOCUMENT!r})
except ConfigError as error:
    assert "cannot write here" in str(error), error
else:
    raise AssertionError("a config was written into a read-only folder")
"""


def test_read_only_folder(tmp_path: Path) -> None:
    target = tmp_path / "modelmon.toml"
    target.write_text(GOOD)
    tmp_path.chmod(0o500)
    try:
        done = run_unprivileged(READ_ONLY_WRITE, str(target))
        assert done.returncode == 0, done.stderr
        assert target.read_text() == GOOD
    finally:
        tmp_path.chmod(0o700)


def test_write_then_read(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.toml", DOCUMENT)
    assert read_config(path).strategy == "pread"


def test_written_file_says_chunk_in_mib_comments_keep_and_leaves_unused_options_out(
    tmp_path: Path, sharded_model: Path
) -> None:
    from modelmon.core.model.formats import open_model
    from modelmon.core.output.config import build_document

    from ..measuring.records import candidate

    winner = candidate("pread", 900.0, 910.0, 905.0, workers=2, chunk=16 << 20, cache="keep")
    document = build_document(
        open_model(sharded_model),
        winner,
        (winner,),
        None,
        ["Best: pread."],
        config_name="m.toml",
        cache="cold",
        usable_ram=10**10,
    )
    assert "madvise" not in document["recommended"]  # pread maps nothing
    assert "prefetch" not in document["recommended"]  # only warmup has a warm-up pass
    assert document["recommended"]["chunk_mib"] == 16 and "chunk" not in document["recommended"]
    path = write_config(tmp_path / "m.toml", document)
    text = path.read_text()
    keep = text.index('cache = "keep"')
    assert "# keep: a load leaves the page cache as it finds it" in text[:keep]
    assert "verified cold cache" in text[:keep]
    config = read_config(path)
    assert (config.strategy, config.options) == ("pread", winner.options)


def test_old_files_with_chunk_in_bytes_still_read_and_both_forms_are_refused(
    tmp_path: Path,
) -> None:
    old = GOOD.replace('chunk = "16MiB"', "chunk = 16777216")
    assert read_config(write(tmp_path, old)).options.chunk == 16 << 20
    new = GOOD.replace('chunk = "16MiB"', "chunk_mib = 16")
    assert read_config(write(tmp_path, new)).options.chunk == 16 << 20
    both = GOOD.replace('chunk = "16MiB"', 'chunk = "16MiB"\nchunk_mib = 16')
    with pytest.raises(ConfigError, match=r"recommended\.chunk_mib: give chunk or chunk_mib"):
        read_config(write(tmp_path, both))
    for value in ('"lots"', "nan", "inf", "-inf", "-1", "0", "2048", "true"):
        bad = GOOD.replace('chunk = "16MiB"', f"chunk_mib = {value}")
        with pytest.raises(ConfigError, match=r"recommended\.chunk_mib: chunk must be a number"):
            read_config(write(tmp_path, bad))


def test_a_bucket_read_at_kilobytes_a_second_keeps_its_rates_in_the_file(
    sharded_model: Path, tmp_path: Path
) -> None:
    """A 10 kB/s bucket's figures are kept to three significant digits: 0.0098 MB/s, never
    the 0.0 that one decimal of MB/s makes of them."""
    from modelmon.core.model.formats import open_model
    from modelmon.core.output.config import build_document

    from ..measuring.records import candidate

    winner = candidate("pread", 0.0098, 0.0101, 0.0099, workers=1)
    slower = candidate("sequential", 0.0052, 0.0054, workers=1)
    document = build_document(
        open_model(sharded_model),
        winner,
        (winner, slower),
        None,
        ["Best: pread."],
        config_name="m.toml",
        cache="cold",
        usable_ram=10**10,
    )
    evidence = document["evidence"]
    assert (evidence["median_mbps"], evidence["min_mbps"], evidence["max_mbps"]) == (
        0.0099,
        0.0098,
        0.0101,
    )
    assert document["alternatives"][0]["median_mbps"] == 0.0053
    assert document["recommendation"]["median_mbps"] == 0.0099
    written = read_config(write_config(tmp_path / "m.toml", document))
    assert written.strategy == "pread"


def _ranks_answer(model: Path, limit: int, way: Any, pick: Any) -> Any:
    """recommend --ranks 4's answer for ``model`` under ``limit``: ``way`` measured,
    ``pick`` (None: nothing fit)."""
    from modelmon.core.measuring.ranks_search import RanksRecommendation

    return RanksRecommendation(
        model=str(model),
        model_bytes=1 << 20,
        ranks=4,
        memory_limit=limit,
        ways=(way,),
        pick=pick,
        holds_at=None,
        holds_verified=False,
        budget_s=60.0,
        seconds=1.0,
    )


def test_a_ranks_config_applies_with_the_page_cache_kept(
    sharded_model: Path, tmp_path: Path
) -> None:
    """The ways were measured cold, but the file a load applies (`modelmon load --config`,
    `core.load(config=...)`) keeps the page cache, as recommend's own file does: "cold"
    there would evict the model before every load of it."""
    from modelmon.core.measuring.ranks_search import RanksWay, WayMeasured
    from modelmon.core.output.ranks_answer import ranks_document

    way = RanksWay("one-reader", "direct", LoadOptions(workers=4, cache="cold"))
    pick = WayMeasured(way, needs_bytes=3 << 30)
    found = _ranks_answer(sharded_model, 4 << 30, pick, pick)
    document = ranks_document(found, "/tmp/ranks.toml")
    assert document["recommended"]["strategy"] == "direct"
    assert document["recommended"]["cache"] == "keep"
    # What it was measured on: applied to another model, the load says so in one line.
    from modelmon.core.errors import ConfigMismatchWarning
    from modelmon.core.loading.config_file import apply_config
    from modelmon.core.model.formats import open_model
    from modelmon.core.output.config_text import render

    written = tmp_path / "ranks.toml"
    written.write_text(render(document))
    from modelmon.core import write_safetensors_model

    other = write_safetensors_model(tmp_path / "other", layers=1, hidden=64, vocab=128, seed=5)
    with pytest.warns(ConfigMismatchWarning, match="measured on a different model"):
        apply_config(written, open_model(str(other)))


def test_a_ranks_config_where_no_way_fit_says_so_when_applied(
    sharded_model: Path, tmp_path: Path
) -> None:
    """recommend --ranks under a limit nothing fits in writes its answer (no [recommended]
    table); a load that applies it is refused saying that nothing fit, not that the file
    is missing a table."""
    from modelmon.core.errors import ConfigError
    from modelmon.core.loading.config_file import apply_config
    from modelmon.core.measuring.ranks_search import RanksWay, WayMeasured
    from modelmon.core.model.formats import open_model
    from modelmon.core.output.config_text import render
    from modelmon.core.output.ranks_answer import ranks_document

    way = WayMeasured(RanksWay("whole", "sequential", LoadOptions()), needs_bytes=283 << 20)
    found = _ranks_answer(sharded_model, 1 << 20, way, None)
    written = tmp_path / "nothing.toml"
    written.write_text(render(ranks_document(found, str(written))))
    said = r"no way of loading 4 ranks fit within 1 MiB there: nothing to apply \(the least"
    with pytest.raises(ConfigError, match=said + r" a way needed: 283 MiB\)"):
        apply_config(written, open_model(str(sharded_model)))
