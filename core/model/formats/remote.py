"""Models in object storage: ``s3://BUCKET/KEY`` (a .safetensors, a shard index, a .gguf),
``s3://BUCKET/PREFIX/`` (a prefix holding one of them, chosen as in a folder), and
``https://host/path``. The headers are read by ranged GETs through the same parsers and
checks as files (``storage.objects.ObjectSource`` is their byte source); each ModelFile
carries its object's facts (URL, size, ETag, last-modified, endpoint, region, host kind).
A prefix's listing also says what the model is (``model.kind``): its ``model_index.json``,
its ``config.json`` (read as a folder's is), kept as ``Model.kind``. One connection serves
the whole opening and is closed after it.
"""

from __future__ import annotations

import dataclasses
import threading

from modelmon.core.errors import ModelFormatError, ObjectNotFoundError, StorageError
from modelmon.core.model.formats.combine import ParseShard, combine
from modelmon.core.model.formats.gguf import parse_gguf_source
from modelmon.core.model.formats.opening import format_of
from modelmon.core.model.formats.safetensors import parse_safetensors_source
from modelmon.core.model.formats.safetensors_index import weight_map_of
from modelmon.core.model.kind import CONFIG_BYTES, CONFIG_NAME, PIPELINE_NAME, kind_of, read_config
from modelmon.core.model.records import Kind, Model, ModelFile, TensorExtent
from modelmon.core.storage.connection import Connection, Listed, Store
from modelmon.core.storage.objects import ObjectSource, open_store
from modelmon.core.storage.urls import ObjectURL, parse_object_url
from modelmon.core.system.model_files import MAX_HEADER_BYTES

INDEX_SUFFIX = ".safetensors.index.json"
MAX_LISTED = 10_000  # objects right under a prefix: more is a bucket, not a model's folder
OPEN_AT_ONCE = 8  # shards whose first GET is in flight at once


def open_remote_model(text: str) -> Model:
    """The model at a URL; ModelFormatError for a bad header, StorageError for what the
    storage refused (credentials, a missing bucket, an endpoint down...)."""
    url = parse_object_url(text)
    with open_store(url) as store:
        connection = store.connect()
        try:
            return _Opening(store, connection).open(url)
        finally:
            connection.close()


class _Opening:
    def __init__(self, store: Store, connection: Connection) -> None:
        self.store, self.connection = store, connection

    def source(self, url: ObjectURL) -> ObjectSource:
        return ObjectSource(self.store, url, self.connection)

    def open(self, url: ObjectURL) -> Model:
        if url.is_prefix:
            return self.prefix(url, self.store.list(url, MAX_LISTED))
        if url.name.endswith(".json"):
            return self.sharded(url)
        try:
            source = self.source(url)
        except ObjectNotFoundError as exc:
            # s3://bucket/models (no "/"): a prefix, when no object has that very key.
            if url.scheme != "s3" or exc.code == "NoSuchBucket":
                raise
            try:
                listed = self.store.list(url.as_prefix(), MAX_LISTED)
            except ObjectNotFoundError as missing:  # no bucket: said of the URL as written
                raise ObjectNotFoundError(
                    url.text, missing.problem, missing.status, missing.code
                ) from None
            if listed:
                return self.prefix(url.as_prefix(), listed)
            raise
        with source:
            return self.single(source)

    def single(self, source: ObjectSource) -> Model:
        if format_of(source.name, source.read_at(0, 4)) == "gguf":
            return parse_gguf_source(source)
        extents, file, metadata = parse_safetensors_source(source)
        return Model(source.name, "safetensors", (file,), tuple(extents), metadata)

    def prefix(self, prefix: ObjectURL, listed: list[Listed]) -> Model:
        """The model under a prefix (``weights``), and what the objects beside its weights
        say it is: found after the model opens, so that the model's own failures come first."""
        model = self.weights(prefix, listed)
        if model.format == "gguf":  # llama.cpp's whatever lies beside it
            return model
        return dataclasses.replace(model, kind=self.kind(prefix, listed))

    def kind(self, prefix: ObjectURL, listed: list[Listed]) -> Kind:
        """What the objects right under ``prefix`` say its weights are, by the rule a folder's
        files are judged by: a config.json too large to be one, or one that cannot be read,
        says nothing (as a folder's)."""
        sizes = {item.name: item.size for item in listed}
        size = sizes.get(CONFIG_NAME)
        config: dict[str, object] = {}
        if PIPELINE_NAME not in sizes and size is not None and size <= CONFIG_BYTES:
            try:
                url = prefix.child(CONFIG_NAME)
                with ObjectSource(self.store, url, self.connection, CONFIG_BYTES + 1) as source:
                    config = read_config(source)
            except StorageError:
                config = {}
        return kind_of(config, pipeline=PIPELINE_NAME in sizes)

    def weights(self, prefix: ObjectURL, listed: list[Listed]) -> Model:
        """The model under a prefix, chosen as in a folder: its one shard index, else its
        .safetensors (one, or all as shards), else its one .gguf."""
        names = sorted(item.name for item in listed if "/" not in item.name)
        indexes = [name for name in names if name.endswith(INDEX_SUFFIX)]
        if len(indexes) == 1:
            return self.sharded(prefix.child(indexes[0]))
        if indexes:
            raise ModelFormatError(
                prefix.text, f"several shard indexes ({', '.join(indexes)}); name one"
            )
        shards = [name for name in names if name.endswith(".safetensors")]
        if len(shards) == 1:
            with self.source(prefix.child(shards[0])) as source:
                return self.single(source)
        if shards:
            urls = [prefix.child(name).text for name in shards]
            return self.combined(prefix.text, urls, None, None)
        ggufs = [name for name in names if name.endswith(".gguf")]
        if len(ggufs) == 1:
            with self.source(prefix.child(ggufs[0])) as source:
                return self.single(source)
        if ggufs:
            raise ModelFormatError(
                prefix.text, f"several GGUF files ({', '.join(ggufs[:4])}...); name one"
            )
        if not listed:
            problem = f"no objects under this prefix at {self.store.endpoint}"
            raise ObjectNotFoundError(prefix.text, problem)
        raise ModelFormatError(prefix.text, "holds no .safetensors, index or .gguf object")

    def sharded(self, index: ObjectURL) -> Model:
        with self.source(index) as source:
            if source.size > MAX_HEADER_BYTES:
                raise ModelFormatError(
                    index.text,
                    f"index: {source.size} bytes, over the {MAX_HEADER_BYTES} byte limit",
                )
            data = source.read_at(0, source.size)
        weight_map = weight_map_of(index.text, data, lambda shard: index.sibling(shard).text)
        shards = sorted(set(weight_map.values()))
        return self.combined(index.text, shards, weight_map, index.name)

    def combined(
        self,
        path: str,
        shards: list[str],
        weight_map: dict[str, str] | None,
        index_name: str | None,
    ) -> Model:
        """The shards' model. Their first GETs go out at once (``OPEN_AT_ONCE`` connections:
        a round trip each, not one after the other), then each header is parsed in turn, and
        a shard's failure is told when its turn comes (the first in shard order)."""
        opened = self.open_all(shards) if len(shards) > 1 else {}
        try:
            return combine(path, shards, weight_map, self.shard_parser(index_name, opened))
        finally:
            for item in opened.values():
                if isinstance(item, ObjectSource):
                    item.close()

    def open_all(self, shards: list[str]) -> dict[str, ObjectSource | Exception]:
        """Every shard opened, ``OPEN_AT_ONCE`` at a time, each on its own connection.

        The wait for them is the caller's to leave: Ctrl+C (or SIGTERM) raises here at once
        instead of waiting out a silent endpoint's requests. The readers left behind are
        daemon threads that end with their request (at the storage timeout at most) and
        close what they opened."""
        pending = list(shards)
        opened: dict[str, ObjectSource | Exception] = {}
        lock = threading.Lock()
        abandoned = threading.Event()

        def open_next() -> None:
            while True:
                with lock:
                    if not pending or abandoned.is_set():
                        return
                    shard = pending.pop(0)
                try:
                    item: ObjectSource | Exception = ObjectSource(
                        self.store,
                        parse_object_url(shard),  # its own connection
                    )
                except Exception as exc:  # told in the shard's turn, as a serial opening would
                    item = exc
                with lock:
                    if not abandoned.is_set():
                        opened[shard] = item
                        continue
                if isinstance(item, ObjectSource):
                    item.close()
                return

        readers = [
            threading.Thread(target=open_next, name="modelmon-shard-header", daemon=True)
            for _ in range(min(OPEN_AT_ONCE, len(shards)))
        ]
        for reader in readers:
            reader.start()
        try:
            for reader in readers:
                reader.join()
        except BaseException:
            with lock:
                abandoned.set()
                left = list(opened.values())
            for item in left:
                if isinstance(item, ObjectSource):
                    item.close()
            raise
        return {shard: opened[shard] for shard in shards}

    def shard_parser(
        self, index_name: str | None, opened: dict[str, ObjectSource | Exception]
    ) -> ParseShard:
        def parse(shard: str) -> tuple[list[TensorExtent], ModelFile, dict[str, str]]:
            try:
                item = opened.get(shard) or self.source(parse_object_url(shard))
                if isinstance(item, Exception):
                    raise item
            except ObjectNotFoundError:
                if index_name is None:
                    raise
                raise ModelFormatError(shard, f"shard named by {index_name} is missing") from None
            with item:
                return parse_safetensors_source(item)

        return parse
