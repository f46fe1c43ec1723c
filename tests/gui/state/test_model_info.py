"""The model panel's rows (Qt-free): facts gathered off the GUI thread, worded for the panel."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from modelmon.core import StorageFacts, open_model
from modelmon.gui.state.model_info import gather, panel_rows


def test_the_panel_says_what_the_model_is_and_whether_it_fits(sharded_model: Path):
    info = gather(str(sharded_model))
    rows = panel_rows(info)
    model = open_model(sharded_model)
    assert rows["tensors"].text == f"{len(model.extents):,}"
    assert rows["format"].text == "safetensors, 3 file(s)"
    assert rows["blocks"].text.startswith(f"{len(model.blocks())} (4 layers")
    assert rows["memory"].text.endswith("fits") and rows["memory"].level is None
    tiny = dataclasses.replace(info, memory=dataclasses.replace(info.memory, usable=1024))
    memory = panel_rows(tiny)["memory"]
    assert "does NOT fit" in memory.text and memory.level == "error"


def test_the_memory_row_warns_where_loading_would_push_into_swap(sharded_model: Path):
    info = gather(str(sharded_model))
    need = info.model.total_bytes
    tight = dataclasses.replace(info.memory, usable=need + need // 2, swap_total=1 << 30)
    row = panel_rows(dataclasses.replace(info, memory=tight))["memory"]
    assert row.level == "warning" and "swap" in row.text and row.tip and "hugepages" in row.tip
    roomy = dataclasses.replace(info.memory, usable=4 * need, swap_total=1 << 30)
    row = panel_rows(dataclasses.replace(info, memory=roomy))["memory"]
    assert row.level is None and row.tip and "model + its page cache" in row.tip


def test_storage_rows_word_virtual_disks_and_network_mounts(sharded_model: Path):
    info = gather(str(sharded_model))
    virtio = StorageFacts(
        "/m",
        "/",
        "ext4",
        "/dev/vda1",
        "vda",
        "vda1",
        "virtio",
        True,
        128,
        "mq-deadline",
        False,
        False,
        "ext4 on a virtio disk",
    )
    rows = panel_rows(dataclasses.replace(info, storage=(virtio,)))
    assert rows["device"].text == "vda1 of vda (virtio)"
    assert rows["rotational"].text == "yes (as the virtual disk reports it)"
    assert rows["network"].text == "no (local)" and rows["network"].level is None
    fuse = dataclasses.replace(
        virtio, block_device=None, partition=None, source="rclone:", is_network=True, is_fuse=True
    )
    rows = panel_rows(dataclasses.replace(info, storage=(fuse, virtio)))
    assert rows["device"].text == "rclone:"
    assert rows["network"].text == "FUSE, possibly network" and rows["network"].level == "warning"
    assert rows["fs"].text.endswith("(+1 more folders)")


def test_the_memory_tip_says_when_freed_memory_goes_back_to_the_host(sharded_model: Path):
    info = gather(str(sharded_model))
    for returned in (True, False):
        memory = dataclasses.replace(info.memory, returns_free_memory=returned)
        tip = panel_rows(dataclasses.replace(info, memory=memory))["memory"].tip or ""
        assert ("free page reporting" in tip) is returned
