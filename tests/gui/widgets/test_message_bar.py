"""The message row: a message longer than the row is elided, and shown whole on asking."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from modelmon.gui.widgets.message_bar import MessageBar

# As File ▸ Open URL… says it of a bucket that refuses unsigned requests, with no credentials.
NO_CREDENTIALS = (
    "s3://models/m/model.safetensors: the endpoint http://127.0.0.1:60899 refused the request "
    "(400 UnsupportedAlgorithm), which was anonymous: no credentials were found (looked in "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, profile default in ~/.aws/credentials and "
    "~/.aws/config, SSO, roles); give them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
    "a profile (AWS_PROFILE)"
)


def test_a_message_longer_than_its_row_can_be_read_whole(qtbot) -> None:
    bar = MessageBar()
    qtbot.addWidget(bar)
    bar.resize(990, 24)  # the bottom row of a 1000 px window
    bar.show_message(NO_CREDENTIALS, "error")
    QApplication.processEvents()
    assert bar.message() == NO_CREDENTIALS and bar.more.isVisible()
    seen: list[str] = []

    def read_and_close() -> None:
        box = bar.box
        if box is None or not box.isVisible():
            QTimer.singleShot(10, read_and_close)
            return
        seen.append(box.text())
        box.accept()

    QTimer.singleShot(0, read_and_close)
    bar.more.click()
    assert seen == [NO_CREDENTIALS] and bar.box is None
    # A message that fits its row needs no button; a wider row, none either.
    bar.show_message("Export written.", "info")
    QApplication.processEvents()
    assert not bar.more.isVisible()
    bar.show_message(NO_CREDENTIALS, "error")
    bar.resize(4000, 24)
    QApplication.processEvents()
    assert not bar.more.isVisible()
