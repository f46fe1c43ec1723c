"""The file dialogs open wide enough for their columns: no size or date cut ("27 11 2…6")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtWidgets import QFileDialog, QTreeView, QWidget

from modelmon.gui.widgets.file_dialogs import file_dialog


# Qt's mime database (file types of the listing) opens its cache file once per process and
# keeps it: Qt's, not the dialog's.
@pytest.mark.allow_leaks("Qt's mime database keeps /usr/share/mime/mime.cache open")
@pytest.mark.parametrize("save", [False, True], ids=["open", "save"])
def test_every_column_of_the_file_dialog_shows_whole(qtbot, tmp_path: Path, save: bool):
    for name in ("model-00001-of-00004.safetensors", "model.safetensors.index.json"):
        (tmp_path / name).write_bytes(b"x" * 123_456)
        os.utime(tmp_path / name, (1_700_000_000, 1_700_000_000))
    window = QWidget()
    qtbot.addWidget(window)
    window.resize(1000, 700)
    window.show()
    start = str(tmp_path / "a.json") if save else str(tmp_path)
    dialog = file_dialog(window, "Open model", start, "All files (*)", save=save)
    dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
    qtbot.addWidget(dialog)
    dialog.show()
    (view,) = [v for v in dialog.findChildren(QTreeView) if v.isVisible()]
    model = view.model()
    qtbot.waitUntil(lambda: model.rowCount(view.rootIndex()) == 2, timeout=10_000)
    header = view.header()
    qtbot.waitUntil(
        lambda: all(
            header.sectionSize(c) >= view.sizeHintForColumn(c) for c in range(1, header.count())
        ),
        timeout=5_000,
    )
    assert header.sectionSize(0) >= view.sizeHintForColumn(0)  # the names whole too
    assert dialog.width() >= 760
    dialog.reject()
