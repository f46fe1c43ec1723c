"""File ▸ Open URL…: a model in object storage (``s3://BUCKET/KEY``, a prefix, or an
``https://`` file), typed or picked from the URLs opened before, and where the bucket is
read from: an endpoint (MinIO, R2, a local server) and the AWS profile whose credentials
sign the requests (``gui/state/bucket_access.py``). It only asks: each is checked as text
here (a credential in the URL or the endpoint is refused, in one line; a profile is a name,
its keys stay in ~/.aws), and the model opens in the background like a file."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLayout,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from modelmon.gui.state.bucket_access import Access, check_endpoint, check_profile
from modelmon.gui.theme import current_theme

HINT = (
    "s3://BUCKET/KEY (a .safetensors, a *.safetensors.index.json, a .gguf), s3://BUCKET/PREFIX/ "
    "(the model in it), or https://host/path of a server that answers byte ranges. Left empty, "
    "the endpoint and the credentials are your AWS configuration's (AWS_ENDPOINT_URL, "
    "AWS_PROFILE, ~/.aws, AWS_ACCESS_KEY_ID…); a secret is never typed here, nor kept."
)
ENDPOINT_TIP = (
    "The S3 server to ask, for MinIO, R2, Ceph or a local server: http(s)://HOST[:PORT], no "
    "user or password in it. Empty: your AWS configuration's (AWS_ENDPOINT_URL, a profile's "
    "endpoint_url), else AWS S3."
)
PROFILE_TIP = (
    "The AWS profile whose credentials sign the requests: a name in ~/.aws/config or "
    "~/.aws/credentials (the keys stay there; modelmon reads and keeps only the name). Empty: "
    "your AWS configuration as it is (the environment's keys first, then AWS_PROFILE or the "
    "default profile)."
)
FIELD_WIDTH = 560


class OpenURLDialog(QDialog):
    """Asks for a URL; ``check(text)`` says what to open, or why not in one line."""

    def __init__(
        self,
        recent: list[str],
        check: Callable[[str], tuple[str | None, str | None]],
        parent: QWidget | None = None,
        access: Access | None = None,
        profiles: list[str] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Open URL")
        self.check = check
        self.url: str | None = None  # what ``check`` made of the text, once accepted
        self.access: Access | None = None  # the endpoint and profile, once accepted
        given = access or Access()
        self.endpoint = QLineEdit(given.endpoint)
        self.endpoint.setPlaceholderText("your AWS configuration's (e.g. http://127.0.0.1:9000)")
        self.endpoint.setClearButtonEnabled(True)
        self.endpoint.setToolTip(ENDPOINT_TIP)
        self.profile = QComboBox()
        self.profile.setEditable(True)
        self.profile.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.profile.addItems(profiles or [])
        self.profile.setCurrentText(given.profile)
        self.profile.lineEdit().setPlaceholderText("your AWS configuration's (environment first)")
        self.profile.setToolTip(PROFILE_TIP)
        self.field = QComboBox()
        self.field.setEditable(True)
        self.field.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.field.addItems(recent)
        self.field.setCurrentIndex(-1)
        self.field.lineEdit().setPlaceholderText("s3://bucket/models/llama-3b/")
        self.field.lineEdit().setClearButtonEnabled(True)
        self.field.setFixedWidth(FIELD_WIDTH)
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
        self.endpoint.textEdited.connect(lambda _text: self.error.hide())
        where = QFormLayout()
        where.addRow("Endpoint:", self.endpoint)
        where.addRow("Credentials of profile:", self.profile)
        for row in range(where.rowCount()):
            label = where.itemAt(row, QFormLayout.ItemRole.LabelRole).widget()
            label.setToolTip(ENDPOINT_TIP if row == 0 else PROFILE_TIP)
        layout = QVBoxLayout(self)
        # The dialog follows its contents: a refusal shown below the field makes it taller
        # rather than covering the hint (wrapped labels at the field's width).
        layout.setSizeConstraint(QLayout.SizeConstraint.SetFixedSize)
        for label in (hint, self.error):
            label.setFixedWidth(FIELD_WIDTH)
        layout.addWidget(QLabel("Open a model in object storage:"))
        layout.addWidget(self.field)
        layout.addLayout(where)
        layout.addWidget(self.error)
        layout.addWidget(hint)
        layout.addWidget(buttons)

    def text(self) -> str:
        return self.field.currentText().strip()

    def accept(self) -> None:
        """Close only on a URL that can be opened, read from an endpoint and with a profile
        that can be used; else say why, in the dialog."""
        url, refused = self.check(self.text())
        endpoint, endpoint_refused = check_endpoint(self.endpoint.text())
        profile, profile_refused = check_profile(self.profile.currentText())
        refusal = refused if url is None else endpoint_refused or profile_refused
        if url is None or endpoint is None or profile is None:  # its one line
            self.error.setText(refusal or "not a URL")
            self.error.show()
            return
        self.url, self.access = url, Access(endpoint, profile)
        super().accept()
