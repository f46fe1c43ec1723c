"""The app's state, Qt-free: the models on this machine, the model being opened, the open
model's workbench, and which page the window shows.

Opening is where the parts meet: a model opens in the background; while a job runs, opening
another needs the user's yes (``open_path`` says so) and then waits for the job to stop;
asking for the model that is already open just shows it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from modelmon.core import Discovery, discover_models
from modelmon.gui.state.bucket import BucketState, Listing
from modelmon.gui.state.ceilings_state import CeilingStore
from modelmon.gui.state.discovery import DiscoveryState
from modelmon.gui.state.events import Event, Post
from modelmon.gui.state.model_info import ModelInfo
from modelmon.gui.state.model_opening import ModelOpener, demo_index
from modelmon.gui.state.workbench import Workbench

PAGES = ("start", "model")


def same_model(a: str, b: str) -> bool:
    """Two names of one model: the same text, or the same file or folder on disk."""
    if a == b:
        return True
    try:
        return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)
    except OSError:
        return False


class AppState:
    def __init__(
        self,
        post: Post,
        discover: Callable[[], Discovery] = discover_models,
        make_demo: Callable[[], Path] = demo_index,
        ceiling_store: CeilingStore | None = None,
        remember_prefix: Callable[[str], None] = lambda _prefix: None,
        list_bucket: Callable[[str], Iterable[Listing]] | None = None,
    ) -> None:
        """``remember_prefix``: where the bucket prefix the user names is kept;
        ``list_bucket``: how the objects under it are listed (tests give their own)."""
        self.bench = Workbench(post, ceiling_store)
        self.discovery = DiscoveryState(post, discover)
        self.bucket = (
            BucketState(post, remember_prefix, list_bucket)
            if list_bucket is not None
            else BucketState(post, remember_prefix)
        )
        self.opener = ModelOpener(post, make_demo)
        self.page = "start"
        self.pending_open: str | None = None  # opens once the running job has stopped
        self._pending_info: ModelInfo | None = None  # opened while a job ran
        self.page_changed = Event()  # page name
        self.model_shown = Event()  # ModelInfo: a model was opened (title, recent files)
        self.opener.loaded.connect(self._loaded)
        self.bench.running_changed.connect(self._running_changed)

    def show_page(self, page: str) -> None:
        if page not in PAGES:
            raise ValueError(f"no page {page!r}")
        if page == "model" and self.bench.info is None:
            return
        if page != self.page:
            self.page = page
            self.page_changed.emit(page)

    def is_open(self, path: str) -> bool:
        info = self.bench.info
        return info is not None and (same_model(info.path, path) or info.model.path == path)

    def open_path(self, path: str) -> bool:
        """Open ``path``; False when a job runs and the user must agree to stop it first
        (then ``stop_and_open``). The model already open is shown, whatever runs."""
        if self.is_open(path):
            self.show_page("model")
            return True
        if self.bench.running:
            return False
        self.opener.open(path)
        return True

    def stop_and_open(self, path: str) -> None:
        """Cancel the running job; open ``path`` once it has stopped."""
        self.pending_open = path
        self.bench.cancel()

    def use_demo(self) -> None:
        self.opener.use_demo()

    def _loaded(self, info: ModelInfo) -> None:
        if self.bench.running:  # a job started while it opened: it opens when that ends
            self._pending_info = info
            return
        self.bench.open(info)
        self.show_page("model")
        self.model_shown.emit(info)

    def _running_changed(self, running: bool) -> None:
        if running:
            return
        info, self._pending_info = self._pending_info, None
        if info is not None:
            self._loaded(info)
        path, self.pending_open = self.pending_open, None
        if path is not None:
            self.open_path(path)

    def shutdown(self) -> bool:
        stopped = self.bench.shutdown()
        self.opener.shutdown()
        self.discovery.shutdown()
        self.bucket.shutdown()
        return stopped
