"""The model panel: what the file is, where it lives, and whether it fits in RAM."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFormLayout, QGroupBox, QLabel, QWidget

from modelmon.gui.state.model_info import ModelInfo, panel_rows
from modelmon.gui.theme import current_theme
from modelmon.gui.widgets.elided_label import ElidedLabel

# Narrower than this, a value beside its title ("Network/FUSE:") has about 120 px and a
# fact such as "1.08 GB on disk, 1.08 GB of tensors" wraps onto three lines.
TITLES_BESIDE_MIN_WIDTH = 300


class ModelPanel(QGroupBox):
    """Format, size, tensors, dtypes and blocks; storage facts; available RAM vs model size."""

    ROWS = (
        (
            "file",
            "Model",
            "The model opened: a file, a shard index, a folder, or a bucket's object or prefix.",
        ),
        ("format", "Format", "File format and number of files."),
        ("size", "Size", "Bytes on disk, and bytes of tensor data a load reads."),
        ("tensors", "Tensors", "Number of tensors in the model."),
        ("dtypes", "Dtypes", "Tensor element types, with how many tensors and bytes each."),
        ("blocks", "Blocks", "Loadable units: transformer layers plus embeddings and head."),
        ("fs", "Filesystem", "Filesystem type and mount point of the model's folder."),
        ("device", "Device", "Block device under the filesystem and how it is attached."),
        (
            "rotational",
            "Rotational",
            "Whether the kernel reports a spinning disk (seeks are slow) or not.",
        ),
        (
            "readahead",
            "Readahead",
            "How far the kernel reads ahead of sequential reads on this device.",
        ),
        (
            "network",
            "Network/FUSE",
            "Whether reads go over a network or through a FUSE daemon (higher latency).",
        ),
        ("memory", "RAM", "Memory this process may fill (cgroup limit included) vs model size."),
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Model", parent)
        layout = QFormLayout(self)
        self.form = layout
        layout.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        layout.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        layout.setVerticalSpacing(3)
        self.values: dict[str, QLabel] = {}
        self.titles: dict[str, QLabel] = {}
        for key, title, tip in self.ROWS:
            name = QLabel(f"{title}:")
            # A file name has nowhere to wrap: it ends in "…" (the whole path is its tooltip);
            # the other facts wrap, and the panel scrolls (see Workspace) rather than clip.
            value = ElidedLabel("–") if key == "file" else QLabel("–")
            value.setTextFormat(Qt.TextFormat.PlainText)  # file names may hold "<"
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setWordWrap(key != "file")
            name.setToolTip(tip)
            value.setToolTip(tip)
            layout.addRow(name, value)
            self.values[key] = value
            self.titles[key] = name

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Narrow (beside the configurations in a small window), each title goes above its
        value: the values take the panel's whole width and wrap onto 2 lines, not 3."""
        super().resizeEvent(event)
        wrap = (
            QFormLayout.RowWrapPolicy.WrapAllRows
            if event.size().width() < TITLES_BESIDE_MIN_WIDTH
            else QFormLayout.RowWrapPolicy.DontWrapRows
        )
        if self.form.rowWrapPolicy() != wrap:
            self.form.setRowWrapPolicy(wrap)
            above = wrap == QFormLayout.RowWrapPolicy.WrapAllRows
            for title in self.titles.values():  # above its value, a title reads as a heading
                font = title.font()
                font.setBold(above)
                title.setFont(font)

    def show_model(self, info: ModelInfo) -> None:
        theme = current_theme()
        colours = {"warning": theme.warning, "error": theme.error}
        own = {key: title for key, title, _tip in self.ROWS}
        for key, row in panel_rows(info).items():
            # A bucket's storage rows say what they hold there (Endpoint, not Device).
            self.titles[key].setText(f"{row.title or own[key]}:")
            self._set(key, row.text, row.tip)
            self._colour(key, colours.get(row.level) if row.level else None)

    def _set(self, key: str, text: str, tip: str | None = None) -> None:
        label = self.values[key]
        label.setText(text)
        if tip:
            label.setToolTip(tip)

    def _colour(self, key: str, colour: str | None) -> None:
        label = self.values[key]
        label.setStyleSheet(f"color: {colour}; font-weight: bold;" if colour else "")
