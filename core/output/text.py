"""Plain-text renderings of models and results for the terminal (the CLI's human output)."""

from __future__ import annotations

import math
from collections import Counter
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from modelmon.core.loading.result import LoadResult
from modelmon.core.model.records import Model, ModelFile
from modelmon.core.options import LoadOptions, format_spec
from modelmon.core.storage.records import ReadStats
from modelmon.core.system.host_memory import RETURNS_FREE_MEMORY, primed_text
from modelmon.core.system.memory_limit import ram_text, ways_text
from modelmon.core.units import human_bytes, rate_text

if TYPE_CHECKING:
    from modelmon.core.measuring.ranks_records import RanksResult
    from modelmon.core.measuring.recommend import Recommendation


def _fraction(value: float) -> str:
    """A measured fraction as a percentage; "not measured" where there is none (NaN)."""
    return f"{value:.1%}" if math.isfinite(value) else "not measured"


def _bytes_by(keys: list[str], lengths: np.ndarray) -> dict[str, int]:
    """{key: the lengths summed}, keys in first-seen order, in whole-column passes."""
    codes = {key: code for code, key in enumerate(dict.fromkeys(keys))}
    sums = np.zeros(len(codes), dtype=np.int64)
    np.add.at(sums, np.fromiter(map(codes.__getitem__, keys), np.int64, len(keys)), lengths)
    return dict(zip(codes, sums.tolist(), strict=True))


def model_summary(model: Model) -> dict[str, Any]:
    """What ``modelmon inspect`` and the model panel show: files, sizes, dtypes, blocks."""
    extents = model.extents
    dtypes = list(map(attrgetter("dtype"), extents))
    lengths = np.fromiter(map(attrgetter("length"), extents), np.int64, len(extents))
    by_dtype = Counter(dtypes)
    bytes_by_dtype = _bytes_by(dtypes, lengths)
    by_block = _bytes_by(list(map(attrgetter("block"), extents)), lengths)
    return {
        "path": model.path,
        "format": model.format,
        "files": [_file_summary(f) for f in model.files],
        "bytes": model.file_bytes,
        "tensor_bytes": model.total_bytes,
        "tensors": len(model.extents),
        "dtypes": {d: {"tensors": n, "bytes": bytes_by_dtype[d]} for d, n in by_dtype.items()},
        "blocks": [{"name": b, "bytes": n} for b, n in by_block.items()],
        "metadata": model.metadata,
    }


def _file_summary(file: ModelFile) -> dict[str, Any]:
    """A file's path and size; an object's facts too (URL, ETag, last-modified, endpoint)."""
    summary: dict[str, Any] = {"path": file.path, "bytes": file.size}
    if file.remote is not None:
        summary["object"] = file.remote.as_dict()
    return summary


# Objects named one per line in ``inspect``'s text; the JSON has them all.
_OBJECTS_SHOWN = 8


def render_inspect(info: dict[str, Any]) -> str:
    lines = [
        f"model     {info['path']}",
        f"format    {info['format']}, {len(info['files'])} file(s), "
        f"{human_bytes(info['bytes'])}, {info['tensors']} tensors",
        "dtypes    "
        + ", ".join(
            f"{d} ×{v['tensors']} ({human_bytes(v['bytes'])})" for d, v in info["dtypes"].items()
        ),
    ]
    blocks = info["blocks"]
    layers = [b for b in blocks if b["name"] not in ("embeddings", "head", "other")]
    named = [b for b in blocks if b["name"] in ("embeddings", "head", "other")]
    summary = f"{len(layers)} layer blocks"
    if layers:
        summary += f" ({layers[0]['name']} … {layers[-1]['name']})"
    summary += "".join(f", {b['name']} {human_bytes(b['bytes'])}" for b in named)
    lines.append(f"blocks    {summary}")
    objects = [file["object"] for file in info["files"] if file.get("object")]
    for facts in objects[:_OBJECTS_SHOWN]:
        etag = facts["etag"] or "none"
        modified = facts["last_modified"] or "not given"
        lines.append(
            f"object    {facts['url']}  {human_bytes(facts['size'])}, ETag {etag}, "
            f"last modified {modified}"
        )
    if len(objects) > _OBJECTS_SHOWN:
        lines.append(f"          … and {len(objects) - _OBJECTS_SHOWN} more objects (--json)")
    for facts in info.get("storage", []):
        lines.append(f"storage   {facts['description']}  [{facts['path']}]")
    memory = info.get("memory")
    if memory:
        fits = "fits" if memory["usable"] >= info["tensor_bytes"] else "does NOT fit"
        lines.append(
            f"memory    {ram_text(memory['usable'])} usable of "
            f"{ram_text(memory['total'])}: the model {fits} in RAM"
        )
        if "swap_total" in memory:
            with_cache = "fits" if memory["usable"] >= 2 * info["tensor_bytes"] else "does not fit"
            swap = (
                f"swap {ram_text(memory['swap_used'])} used of {ram_text(memory['swap_total'])}"
                if memory["swap_total"]
                else "no swap"
            )
            lines.append(
                f"          model + its page cache {with_cache}; {swap}; transparent "
                f"hugepages {memory.get('hugepages') or 'unknown'}"
            )
        if memory.get("returns_free_memory"):
            lines.append(f"          {RETURNS_FREE_MEMORY}")
        if memory.get("proactive_reclaim"):
            lines.append(f"          {memory['proactive_reclaim']}")
    limited = info.get("memory_limit")
    if limited:  # each way of loading against a memory limit, before loading
        ways = ways_text(info["tensor_bytes"], limited["limit_bytes"])
        lines += [f"{'limit' if i == 0 else '':<10}{way}" for i, way in enumerate(ways)]
    return "\n".join(lines)


def requests_text(stats: ReadStats) -> str:
    """A load's ranged GETs in one line: how many, over how many connections, their time to
    first byte, retries and throttles, and what one connection carried."""
    busy = [c for c in stats.connections if c.requests]
    # Only connections that carried bytes have a rate; none did when nothing arrived.
    per = [c.throughput for c in busy if c.busy_s > 0 and c.throughput > 0]
    each = f", {rate_text(float(np.median(per)) / 1e6)} per connection while busy" if per else ""
    retried = f"{stats.retries} retr{'y' if stats.retries == 1 else 'ies'}"
    resumed = f" ({stats.resumed} resumed mid-body)" if stats.resumed else ""
    first_byte = (
        "no first byte arrived"
        if math.isnan(stats.ttfb_median_s)
        else f"first byte {_ms(stats.ttfb_median_s)} median, {_ms(stats.ttfb_p99_s)} p99"
    )
    return (
        f"{stats.requests} GETs over {len(busy)} connection{'s' if len(busy) != 1 else ''}, "
        f"{first_byte}; {retried}{resumed}, {stats.throttles} throttled{each}"
    )


def pace_text(stats: ReadStats) -> str | None:
    """How the readers' pace moved with the bucket's throttles (connections in use, part
    size), in one line; None when it never moved."""
    if not stats.adapted:
        return None
    first, last = stats.pace[0], stats.pace[-1]
    fewest = min(point.connections for point in stats.pace)
    largest = max(point.part for point in stats.pace)
    throttles = f"{stats.throttles} throttle{'' if stats.throttles == 1 else 's'}"
    return (
        f"paced by {throttles}: {_pace(first.connections, first.part)} at the start, "
        f"{fewest} connection{'' if fewest == 1 else 's'} at the fewest, parts up to "
        f"{_mib(largest)}; {_pace(last.connections, last.part)} at the end "
        f"({len(stats.pace) - 1} changes)"
    )


def _pace(connections: int, part: int) -> str:
    return f"{connections} connection{'' if connections == 1 else 's'} × {_mib(part)}"


def _mib(size: int) -> str:
    return f"{size / (1 << 20):g} MiB"


def _ms(seconds: float) -> str:
    return "? ms" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"


def render_result(result: LoadResult) -> str:
    cache = result.cache
    verdict = (
        "verified cold"
        if cache.cold
        else "verified warm"
        if cache.warm
        else "neither cold nor warm"
    )
    cache_line = (
        f"cache     {cache.note}"
        if cache.nothing_local or cache.unseen
        else f"cache     {cache.requested} requested: {cache.resident_before:.1%} resident before "
        f"({verdict}, {cache.method}), "
        f"{_fraction(cache.resident_after)} after"
        + (f" — {cache.note}" if cache.note else "")
        + (f"; {primed_text(cache.primed)}" if primed_text(cache.primed) else "")
    )
    lines = [
        f"model     {result.model} ({result.format}, {len(result.files)} file(s))",
        f"strategy  {format_spec(result.strategy, LoadOptions(**result.options))}",
        cache_line,
    ]
    if result.status == "ok":
        lines.append(
            f"result    {human_bytes(result.bytes)} in {result.seconds:.3f} s = "
            f"{rate_text(result.mbps)}"
        )
    else:
        lines.append(f"result    {result.status.upper()}: {result.error}")
    if result.object_reads is not None:
        lines.append(f"requests  {requests_text(result.object_reads)}")
        paced = pace_text(result.object_reads)
        if paced is not None:
            lines.append(f"pace      {paced}")
    for worker in result.workers:
        lines.append(
            f"worker {worker.id:<3}{human_bytes(worker.bytes):>10} in "
            f"{worker.seconds:.3f} s, {worker.reads} reads, peak RSS "
            f"{ram_text(worker.peak_rss)}"
        )
    memory = memory_text(result)
    if memory:
        lines.append(f"memory    {memory}")
    if result.memory_limit is not None:
        lines.append(f"limit     {result.memory_limit.line()}")
    if result.blocks:
        slowest = max(result.blocks, key=lambda b: b.seconds)
        lines.append(
            f"blocks    {len(result.blocks)}; slowest {slowest.name} "
            f"{slowest.seconds * 1000:.1f} ms; last done at "
            f"{max(b.end for b in result.blocks):.3f} s"
        )
    if result.first_block_s is not None and result.half_blocks_s is not None:
        lines.append(
            f"first     block ready at {result.first_block_s:.3f} s, half of the blocks "
            f"(in use order) at {result.half_blocks_s:.3f} s"
        )
    if result.checksum:
        lines.append(f"checksum  {result.checksum} (crc32 per tensor, blake2b over all)")
    lines.extend(f"note      {note}" for note in result.notes)
    return "\n".join(lines)


def memory_text(result: LoadResult) -> str:
    """ "peak RSS 1.2 GiB in all of modelmon's processes: 1.1 GiB in this one, 76 MiB in
    its workers (each process's own peak, summed: …)"; "" where the parent's peak was not
    measured. A cgroup's peak (``--memory-limit``) counts shared pages once. Priming is not
    in it (the cache line says what was primed)."""
    tree = result.process_tree_peak_rss
    if tree is None or result.parent_peak_rss is None:
        return ""
    return (
        f"peak RSS {ram_text(tree)} in all of modelmon's processes: "
        f"{ram_text(result.parent_peak_rss)} in this one, "
        f"{ram_text(result.workers_peak_rss)} in the load's workers (each process's own "
        "peak, summed: a page several of them map, a library or the model's, counts in each)"
    )


def search_memory_text(rec: Recommendation) -> str:
    """ "peak RSS 76 MiB in the recommended load's own processes, 1.1 GiB at most in all of
    modelmon's processes over the search": the pick's memory beside the whole tree's."""
    own = max((r.workers_peak_rss for r in rec.used.results), default=0)
    runs = [r for c in (*rec.ranked, *rec.peers, *rec.unranked) for r in c.results]
    trees = [r.process_tree_peak_rss for r in runs if r.process_tree_peak_rss is not None]
    text = f"peak RSS {ram_text(own)} in the recommended load's own processes"
    if trees:
        text += f", {ram_text(max(trees))} at most in all of modelmon's processes over the search"
    limits = [r.memory_limit for r in runs if r.memory_limit is not None]
    if trees and limits and max(trees) > min(m.peak_bytes for m in limits):
        # Summed RSS counts a file page each process maps once per process, and page cache
        # the limit reclaims: above the cgroup's peak, it reads as a load past its limit.
        cgroup = max(m.peak_bytes for m in limits)
        text += (
            " (each process's peak RSS, summed: a page of the model that several of them map "
            "counts in each, and mapped pages are page cache, which the limit reclaims; the "
            f"memory cgroup, which the limit holds, peaked at {ram_text(cgroup)})"
        )
    return text


def search_time_text(rec: Recommendation) -> str:
    """ "the search took 131 s; the budget was 60 s (71 s past it)": how long the whole
    search took against its budget, said in the answer's output whatever the progress
    showed (a redirected stderr shows none of it)."""
    took, given = rec.budget.elapsed_s, rec.budget.given_s
    past = round(took - given)
    text = f"the search took {took:.0f} s; the budget was {given:.0f} s"
    return text + (f" ({past} s past it)" if past > 0 else "")


def ranks_table(result: RanksResult) -> list[str]:
    """One row per rank, the bytes it read itself and those it holds of the model (kept in
    its own memory, or mapped from a one-reader's shared copy), and a line that says which."""
    mapped = result.mode == "one-reader"
    lines = [
        f"{'rank':>4}  {'status':<9} {'read by it':>10} {'maps' if mapped else 'kept':>10} "
        f"{'seconds':>8} {'start +s':>8}"
    ]
    for rank in result.ranks:
        ok = rank.status == "ok"  # a failed rank's figures are no load's: none is written
        held = rank.mapped_bytes if mapped else rank.kept_bytes
        lines.append(
            f"{rank.rank:>4}  {rank.status:<9} "
            f"{human_bytes(rank.read_bytes) if ok else '–':>10} "
            f"{ram_text(held) if ok else '–':>10} "  # memory: binary
            f"{f'{rank.seconds:.3f}' if ok else '–':>8} {rank.start:>8.3f}"
        )
    lines.append(_ranks_table_note(result))
    return lines


def _ranks_table_note(result: RanksResult) -> str:
    """What the table's bytes are of: whose reads, and what a rank holds."""
    if result.mode == "one-reader":
        if result.reader is None or result.reader.status != "ok":
            return "each rank reads nothing itself: it maps the reader's copy once it is whole"
        return (
            "each rank read nothing itself: the reader read the model's "
            f"{human_bytes(result.model_bytes)} once, into one shared copy, and every rank "
            "maps all of it (in the node's memory once, not once per rank)"
        )
    kept = "none of it (discard)" if result.options.discard else "its tensor-parallel part"
    if result.mode == "whole":
        return f"each rank read the whole model itself and kept {kept}"
    return (
        "each rank read its own part itself (the whole of a tensor split along its "
        f"columns) and kept {kept}"
    )


def render_ranks(result: RanksResult) -> str:
    """The text report of ``modelmon load --ranks``: one line per rank, the node's time and
    memory."""
    from modelmon.core.measuring.ranks_records import RANKS_MODE_WORDS

    lines = [
        f"{len(result.ranks)} ranks, {result.mode} ({RANKS_MODE_WORDS[result.mode]}): "
        f"{format_spec(result.strategy, result.options)}",
        f"cache before go: {result.cache.requested} requested, "
        + (
            result.cache.note
            if result.cache.unseen
            else f"{result.cache.resident_before:.1%} resident"
            + (f" ({result.cache.note})" if result.cache.note else "")
        ),
    ]
    reader = result.reader
    if reader is not None:
        lines.append(
            f"reader: {reader.status}, {human_bytes(reader.bytes)} into the shared copy in "
            f"{reader.seconds:.3f} s"
            + (f" = {rate_text(reader.mbps)}" if reader.status == "ok" else "")
        )
    lines += ranks_table(result)
    # Whole, each rank reads the model and keeps its part; sliced, each reads and keeps its
    # part: the model is on the node once; one-reader, each maps the reader's whole copy.
    where = {"whole": "read by every rank", "slice": "between the ranks"}.get(
        result.mode, "on every rank"
    )
    lines.append(
        f"slowest rank: {result.seconds:.3f} s from the first go: the model's "
        f"{human_bytes(result.model_bytes)} {where} at {rate_text(result.mbps)}; "
        f"read in all {human_bytes(result.read_bytes)}"
    )
    node = result.node
    if node is not None:
        # RAM, as the limit beside it and every memory figure says it: GiB, MiB.
        split = (
            f" ({ram_text(node.anon_peak_bytes or 0)} anonymous, "
            f"{ram_text(node.cache_peak_bytes or 0)} page cache and shared memory at most)"
            if node.measured
            else " (the ranks' own peaks summed: no cgroup held them)"
        )
        lines.append(
            f"node memory: peak {ram_text(node.peak_bytes)}, "
            f"{node.peak_bytes / max(1, result.model_bytes):.1f} × the model{split}"
        )
        if node.limit is not None:
            lines.append(f"limit: {node.limit.line()}")
    straggler = result.straggler
    if straggler is not None and math.isfinite(straggler.ratio):
        lines.append(
            f"straggler: {straggler.who}, {straggler.seconds:.3f} s = {straggler.ratio:.2f}× "
            f"the median {straggler.median_seconds:.3f} s"
        )
    lines += [f"note: {note}" for note in result.notes]
    if result.error:
        lines.append(f"error: {result.error}")
    return "\n".join(lines)
