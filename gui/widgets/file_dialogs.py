"""The file dialogs (open a model, a folder; save an export), each wide enough for its
columns.

Qt's own dialog (the one used where the desktop offers none, as under Xvfb or a bare window
manager) opens narrow and cuts its Size and Date Modified columns ("27 11 2…6 05:32"). Here
it opens about as wide as the window over it, the name column takes what the others leave
and each other column is as wide as its contents. A desktop's native dialog sizes itself:
nothing of it is touched.
"""

from __future__ import annotations

from PySide6.QtWidgets import QFileDialog, QHeaderView, QTreeView, QWidget

WIDTH_SHARE = 0.85  # of the window the dialog opens over
MIN_WIDTH = 760  # the columns of a date and a size beside a readable name
HEIGHT = 520


def file_dialog(
    parent: QWidget,
    title: str,
    start: str = "",
    filters: str = "",
    mode: QFileDialog.FileMode = QFileDialog.FileMode.ExistingFile,
    save: bool = False,
) -> QFileDialog:
    """A dialog over ``parent`` (not shown yet), sized for its columns."""
    dialog = QFileDialog(parent, title, start, filters)
    dialog.setFileMode(mode)
    if mode == QFileDialog.FileMode.Directory:
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    if save:
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        if start:
            dialog.selectFile(start)  # its folder, and the name offered
    dialog.setViewMode(QFileDialog.ViewMode.Detail)
    screen = parent.screen().availableGeometry() if parent.screen() is not None else None
    width = max(MIN_WIDTH, round(parent.width() * WIDTH_SHARE))
    height = HEIGHT
    if screen is not None:
        width, height = min(width, screen.width() - 40), min(height, screen.height() - 40)
    dialog.resize(width, height)
    for view in dialog.findChildren(QTreeView):  # Qt's own dialog only
        header = view.header()
        header.setStretchLastSection(False)
        for column in range(header.count()):
            header.setSectionResizeMode(
                column,
                QHeaderView.ResizeMode.Stretch
                if column == 0
                else QHeaderView.ResizeMode.ResizeToContents,
            )
    return dialog


def chosen(dialog: QFileDialog) -> str:
    """The file or folder chosen in ``dialog`` (shown now, modal), or "" when cancelled."""
    if not dialog.exec():
        return ""
    files = dialog.selectedFiles()
    return files[0] if files else ""


def open_file(parent: QWidget, title: str, start: str, filters: str) -> str:
    return chosen(file_dialog(parent, title, start, filters))


def open_folder(parent: QWidget, title: str, start: str = "") -> str:
    return chosen(file_dialog(parent, title, start, mode=QFileDialog.FileMode.Directory))


def save_file(parent: QWidget, title: str, start: str, filters: str) -> str:
    dialog = file_dialog(parent, title, start, filters, QFileDialog.FileMode.AnyFile, save=True)
    return chosen(dialog)
