"""File ▸ Open URL…: the dialog, then the open with the endpoint and profile it names.

Those are in force for this window's loads (``gui/state/bucket_access.py``), but only once
the model they open has opened: until then they are on trial, and a failed open (or one the
user calls off) puts back the access the open model was read with, so its runs still read it.
Only an access that opened a model is kept in the settings.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QWidget

from modelmon.core.errors import redact_url
from modelmon.gui.settings import AppSettings
from modelmon.gui.state.app_state import AppState
from modelmon.gui.state.bucket import url_to_keep, url_to_open
from modelmon.gui.state.bucket_access import Access, BucketAccess, aws_profiles
from modelmon.gui.state.model_info import ModelInfo
from modelmon.gui.widgets.url_dialog import OpenURLDialog


class URLOpening:
    def __init__(
        self,
        parent: QWidget,
        settings: AppSettings,
        state: AppState,
        ask: Callable[[QWidget, Callable[[], bool]], bool],
        open_path: Callable[[str], bool],
        say_error: Callable[[str], None],
    ) -> None:
        """``ask``: runs a dialog (the window's, which tests answer); ``open_path``: opens a
        model, False when the user keeps the running job instead; ``say_error``: one line."""
        self.parent, self.settings, self.state = parent, settings, state
        self.ask, self.open_path, self.say_error = ask, open_path, say_error
        self.access = BucketAccess()  # in force for this window
        state.opener.loaded.connect(self._opened)
        state.opener.failed.connect(self._failed)

    def choose(self) -> None:
        """The dialog: a URL typed or picked from those opened before, checked as text (a
        credential in it is refused in the dialog), then opened in the background."""
        kept = Access(*self.settings.bucket_access())
        given = self.access.current if self.access.current != Access() else kept
        profiles = aws_profiles(self.access.environ)
        dialog = OpenURLDialog(self.settings.urls(), url_to_open, self.parent, given, profiles)
        if not self.ask(dialog, lambda: bool(dialog.exec())) or dialog.url is None:
            return
        url = dialog.url
        kept_url = url_to_keep(url)  # parsed, and nothing in it that may be secret
        if kept_url is not None:
            self.settings.add_url(kept_url)
        if self.state.is_open(url):  # shown, still read as it was opened
            wanted = dialog.access or Access()
            if wanted != self.access.current:  # said, not dropped without a word
                self.say_error(
                    f"{redact_url(url)} is open already, read with "
                    f"{self.access.current.words()}: to read it with {wanted.words()}, open "
                    "another model, then this one again"
                )
            self.open_path(url)
            return
        self.access.try_access(dialog.access or Access(), url)
        if not self.open_path(url):
            self.access.settle(None)

    def _opened(self, info: ModelInfo) -> None:
        access = self.access.settle(info.path)
        if access is not None:  # what this window's loads read from now on
            self.settings.set_bucket_access(access.endpoint, access.profile)  # checked: no secret

    def _failed(self, error: str) -> None:
        error = self.access.failure_words(error)
        self.access.settle(None)
        self.say_error(error)
