"""The models under a bucket prefix the user names (``s3://models/``), for the start page:
listed off the state's thread, each folder's model one row, opened by its URL. Qt-free.

A folder's model is the one ``open_model`` opens for the folder's URL: its shard index, else
its .safetensors (one, or all as shards); each .gguf is a model of its own (a folder of
several is refused when opened by the folder). The prefix is kept (``remember``) as its
parsed text, which holds no credential: a URL with one is refused before anything is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from modelmon.core.errors import ModelmonError, one_line, redact_url
from modelmon.core.storage import list_objects, parse_object_url
from modelmon.gui.state.events import Event, Post
from modelmon.gui.state.model_list import ModelRow
from modelmon.gui.state.tasks import Task, Tasks

INDEX_SUFFIX = ".safetensors.index.json"
LIST_WAIT_S = 2.0  # on close: a listing is left to end on its own after this


@dataclass(frozen=True, slots=True)
class Listing:
    """One object under the prefix: its key past the prefix and its size (``list_objects``)."""

    name: str
    size: int


def bucket_prefix(text: str) -> str:
    """``text`` as the prefix URL to list (``s3://BUCKET/PREFIX/``), or ModelmonError in one
    line that repeats no credential."""
    url = parse_object_url(text.strip())
    if url.scheme != "s3":
        raise ModelmonError(f"{url.text}: only an s3:// prefix can be listed (https has none)")
    return url.as_prefix().text


def url_to_open(text: str) -> tuple[str | None, str | None]:
    """(the URL to open, None), or (None, why not in one line that repeats no credential):
    File ▸ Open URL… checks the text before anything is opened or kept. The URL is as it is
    requested, its query whole: kept only where nothing in it is redacted (``url_to_keep``)."""
    try:
        return parse_object_url(text.strip()).request_text, None
    except ModelmonError as exc:
        return None, one_line(exc)


def url_to_keep(url: str) -> str | None:
    """``url`` where it may be kept among the URLs opened before: where its query holds no
    value that is written redacted (which may be a credential); else None."""
    return url if redact_url(url) == url else None


def bucket_rows(prefix: str, listed: Iterable[Listing]) -> list[ModelRow]:
    """The models among ``listed`` (objects under ``prefix``), one row each, by folder."""
    folders: dict[str, list[Listing]] = {}
    for item in listed:
        folder, _, _name = item.name.rpartition("/")
        folders.setdefault(folder, []).append(item)
    rows: list[ModelRow] = []
    for folder, items in sorted(folders.items()):
        base = prefix + (f"{folder}/" if folder else "")
        where = f"bucket · {prefix}"
        names = [item.name.rpartition("/")[2] for item in items]
        indexes = [i for i, name in zip(items, names, strict=True) if name.endswith(INDEX_SUFFIX)]
        shards = [i for i, name in zip(items, names, strict=True) if name.endswith(".safetensors")]
        if indexes or shards:
            # The index opens with its shards; without one, every .safetensors is a shard.
            reference = base if len(indexes) <= 1 else prefix + indexes[0].name
            label = folder.rpartition("/")[2] or prefix.rstrip("/").rpartition("/")[2]
            files = shards or indexes
            rows.append(_row(reference, label, "safetensors", files, where))
        for item, name in zip(items, names, strict=True):
            if name.endswith(".gguf"):
                rows.append(_row(prefix + item.name, name, "gguf", [item], where))
    return rows


def _row(reference: str, name: str, form: str, files: list[Listing], where: str) -> ModelRow:
    tip = [reference, *(f"  {item.name}" for item in files[:8])]
    if len(files) > 8:
        tip.append(f"  … and {len(files) - 8} more objects")
    return ModelRow(
        reference=reference,
        name=name,
        format=form,
        files=len(files),
        bytes=sum(item.size for item in files),
        where=where,
        tip="\n".join(tip),
    )


class BucketState:
    """The prefix the user named, the models under it, or why they could not be listed."""

    def __init__(
        self,
        post: Post,
        remember: Callable[[str], None] = lambda _prefix: None,
        lister: Callable[[str], Iterable[Listing]] = list_objects,
    ) -> None:
        self.post, self.remember, self.lister = post, remember, lister
        self.prefix: str | None = None
        self.rows: list[ModelRow] = []
        self.error: str | None = None
        self.listed: str | None = None  # the prefix whose listing ended last (rows or error)
        self.tasks = Tasks(post)
        self._task: Task | None = None  # the listing of ``prefix``; older ones are dropped
        self.changed = Event()  # (): the prefix, listing, rows or error changed

    @property
    def listing(self) -> bool:
        return self._task is not None

    def set_prefix(self, text: str) -> bool:
        """List the models under ``text``; False (``error`` says why) when it is no prefix
        that can be listed. Kept (``remember``) once it parses, whatever the listing says."""
        try:
            prefix = bucket_prefix(text)
        except ModelmonError as exc:
            self.error = one_line(exc)
            self.changed.emit()
            return False
        self.prefix = prefix
        self.remember(prefix)
        self.refresh()
        return True

    def restore(self, prefix: str | None) -> None:
        """The prefix kept from the last session (listed on ``refresh``)."""
        self.prefix = prefix

    def refresh(self) -> None:
        """List the prefix again (a listing of another prefix still running is dropped)."""
        if self.prefix is None:
            return
        self.error, self.rows = None, []
        prefix = self.prefix
        task: Task | None = None

        def done(listed: object, error: str | None) -> None:
            if task is not self._task:
                return  # the user named another prefix since
            self._task = None
            self.listed = prefix
            if error is not None:
                self.error = error
            elif isinstance(listed, tuple):
                items = [Listing(item.name, item.size) for item in listed]
                self.rows = bucket_rows(prefix, items)
            self.changed.emit()

        task = self.tasks.start(lambda: tuple(self.lister(prefix)), "bucket-list", done)
        self._task = task
        self.changed.emit()

    def shutdown(self, timeout_s: float = LIST_WAIT_S) -> None:
        self._task = None
        self.tasks.wait_all(timeout_s)
