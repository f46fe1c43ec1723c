"""File ▸ Open URL…: a model in object storage (``s3://BUCKET/KEY``, a prefix, or an
``https://`` file), typed or picked from the URLs opened before. It only asks: the URL is
checked as text here (a credential in it is refused, in one line), and the model opens in
the background like a file."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLayout,
    QVBoxLayout,
    QWidget,
)

from modelmon.gui.theme import current_theme

HINT = (
    "s3://BUCKET/KEY (a .safetensors, a *.safetensors.index.json, a .gguf), s3://BUCKET/PREFIX/ "
    "(the model in it), or https://host/path of a server that answers byte ranges. Credentials "
    "come from your AWS configuration (AWS_PROFILE, ~/.aws, AWS_ACCESS_KEY_ID…; "
    "AWS_ENDPOINT_URL for MinIO, R2 or a local server), never from the URL."
)


class OpenURLDialog(QDialog):
    """Asks for a URL; ``check(text)`` says what to open, or why not in one line."""

    def __init__(
        self,
        recent: list[str],
        check: Callable[[str], tuple[str | None, str | None]],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Open URL")
        self.check = check
        self.url: str | None = None  # what ``check`` made of the text, once accepted
        self.field = QComboBox()
        self.field.setEditable(True)
        self.field.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.field.addItems(recent)
        self.field.setCurrentIndex(-1)
        self.field.lineEdit().setPlaceholderText("s3://bucket/models/llama-3b/")
        self.field.lineEdit().setClearButtonEnabled(True)
        self.field.setFixedWidth(560)
        self.field.setToolTip("The URL; the list holds those opened before (newest first).")
        hint = QLabel(HINT)
        hint.setWordWrap(True)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet(f"color: {current_theme().error};")
        self.error.hide()
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.field.lineEdit().textEdited.connect(lambda _text: self.error.hide())
        layout = QVBoxLayout(self)
        # The dialog follows its contents: a refusal shown below the field makes it taller
        # rather than covering the hint (wrapped labels at the field's width).
        layout.setSizeConstraint(QLayout.SizeConstraint.SetFixedSize)
        for label in (hint, self.error):
            label.setFixedWidth(560)
        layout.addWidget(QLabel("Open a model in object storage:"))
        layout.addWidget(self.field)
        layout.addWidget(self.error)
        layout.addWidget(hint)
        layout.addWidget(buttons)

    def text(self) -> str:
        return self.field.currentText().strip()

    def accept(self) -> None:
        """Close only on a URL that can be opened; else say why, in the dialog."""
        url, refused = self.check(self.text())
        if url is None:  # a URL with credentials, no bucket...: its one line
            self.error.setText(refused or "not a URL")
            self.error.show()
            return
        self.url = url
        super().accept()
