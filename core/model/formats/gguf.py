"""GGUF files: one walk over header, metadata and tensor infos, every number checked first.

Laid out like gguf-py's ``GGUFReader`` (one class, one pass, tensor byte sizes from its
``GGML_QUANT_SIZES`` table) but trusting nothing: every count, length and offset is checked
against the bytes left in the file before anything is read or allocated, so a damaged file
fails fast with a ``ModelFormatError`` naming the byte offset, where GGUFReader would loop
over billions of empty reads. GGUFReader itself runs only in the library strategy
(``loading/strategies/gguf_reader.py``), where measuring it is the point.

It opens what GGUFReader opens, and refuses on purpose some files GGUFReader reads: those
llama.cpp refuses too (over ``MAX_DIMS`` dimensions, a data offset off the alignment,
overlapping tensors, a shape past int64), and those past a bound on the work a header can
cause (``MAX_TENSORS``, ``MAX_KVS``, KV arrays nested deep or of over ``MAX_ARRAY_ELEMENTS``).
An empty tensor placed past the end of the file is refused as damage. The test
``test_gguf_reference.py`` holds it to that.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import mmap
import os
import struct
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from gguf import LlamaFileType

from modelmon.core.errors import LoadError, ModelFormatError
from modelmon.core.model.blocks import block_of
from modelmon.core.model.formats import gguf_format as spec
from modelmon.core.model.formats.gguf_reads import BoundedReads, show_name
from modelmon.core.model.formats.opening import not_gguf_magic, open_model_file
from modelmon.core.model.formats.shapes import array_shape_problem
from modelmon.core.model.records import Model, ModelFile, TensorExtent
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.source import ByteSource

# name, offset of its tensor-info entry, ggml type number, dims (ne0 first), data offset
_RawInfo = tuple[str, int, int, tuple[int, ...], int]


@dataclass(frozen=True, slots=True)
class GGUFLayout:
    """What one walk learned: the model, and where its top-level KV arrays lie."""

    model: Model
    kv_arrays: Mapping[int, int]  # offset of a top-level KV array value → its size in bytes


def parse_gguf(path: str | os.PathLike[str]) -> Model:
    """Validate a GGUF file and describe its tensors; problems raise ``ModelFormatError``."""
    return read_gguf_layout(path).model


def read_gguf_layout(path: str | os.PathLike[str]) -> GGUFLayout:
    """The model, and what the library strategy's GGUFReader needs to skip the KV arrays."""
    file = os.fspath(path)
    with open_model_file(file) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < 4:
            raise ModelFormatError(file, f"not a GGUF file ({size} bytes)")
        try:
            mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:  # ENOMEM: an address-space limit (ulimit -v) below the size
            raise LoadError(f"{file}: cannot map it to parse: {exc.strerror or exc}") from None
        with mapping as buf:
            return _Walk(file, buf, size).layout()


def parse_gguf_source(source: ByteSource) -> Model:
    """``parse_gguf`` of an object: its header read by ranged GETs as far as the walk needs
    (never the tensors' data), the same checks made."""
    size = source.size
    if size < 4:
        raise ModelFormatError(source.name, f"not a GGUF file ({size} bytes)")
    prefix = bytearray(source.read_at(0, min(size, spec.FIRST_READ)))

    def grow(end: int) -> int:
        if end > spec.MAX_REMOTE_HEADER:
            raise ModelFormatError(
                source.name,
                f"its header runs past {spec.MAX_REMOTE_HEADER >> 20} MiB, more than modelmon "
                "reads of a GGUF over the network (a damaged header?)",
                len(prefix),
            )
        target = min(
            size, spec.MAX_REMOTE_HEADER, max(end, min(2 * len(prefix), end + spec.GROWTH_STEP))
        )
        prefix.extend(source.read_at(len(prefix), target - len(prefix)))
        if len(prefix) < end:
            raise ModelFormatError(source.name, "file shrank while its header was read", end)
        return len(prefix)

    return _Walk(source.name, prefix, size, grow, source.facts).layout().model


class _Walk(BoundedReads):
    """One pass over a mapped GGUF file; reads go through ``skip``, which bounds them."""

    def __init__(
        self,
        file: str,
        buf: mmap.mmap | bytearray,
        size: int,
        grow: Callable[[int], int] | None = None,
        facts: ObjectFacts | None = None,
    ) -> None:
        super().__init__(file, buf, size, grow)
        self.facts = facts
        self.array_elements = 0
        self.alignment = spec.DEFAULT_ALIGNMENT
        self.values: dict[str, object] = {}  # the KEPT_KEYS present
        self.kv_arrays: dict[int, int] = {}

    def layout(self) -> GGUFLayout:
        version, tensor_count, kv_count = self.header()
        self.kv_section(kv_count)
        names: set[str] = set()
        infos = [self.tensor_info(index, names) for index in range(tensor_count)]
        data_start = self.pos + -self.pos % self.alignment
        extents = [self.place(info, data_start) for info in infos]
        self.check_overlaps(extents)
        extents.sort(key=lambda extent: extent.offset)
        files = (ModelFile(self.file, self.size, self.facts),)
        metadata = self.metadata(version, tensor_count, kv_count)
        model = Model(self.file, "gguf", files, tuple(extents), metadata)
        return GGUFLayout(model, self.kv_arrays)

    # --- the sections -------------------------------------------------------------------------

    def header(self) -> tuple[int, int, int]:
        self.need(min(self.size, spec.HEADER_SIZE))
        magic = bytes(self.buf[:4])
        if magic != b"GGUF":
            raise ModelFormatError(self.file, f"not a GGUF file: {not_gguf_magic(magic)}")
        if self.size < spec.HEADER_SIZE:
            cut = f"truncated header: the file has {self.size} bytes, a GGUF header"
            raise ModelFormatError(self.file, f"{cut} {spec.HEADER_SIZE}")
        # Like GGUFReader: a version whose low 16 bits read as 0 was written on a machine of
        # the other byte order, and every number in the file is swapped.
        native = "<" if sys.byteorder == "little" else ">"
        self.order = native
        (version,) = struct.unpack_from(native + "I", self.buf, 4)
        if version & 0xFFFF == 0:
            self.order = ">" if native == "<" else "<"
            (version,) = struct.unpack_from(self.order + "I", self.buf, 4)
        if version not in spec.SUPPORTED_VERSIONS:
            raise self.fail(f"unsupported GGUF version {version} (reads 2 and 3)", 4)
        tensor_count, kv_count = struct.unpack_from(self.order + "QQ", self.buf, 8)
        if tensor_count > spec.MAX_TENSORS:
            problem = f"tensor count {tensor_count} is past the {spec.MAX_TENSORS} modelmon reads"
            raise self.fail(f"{problem} (a damaged header?)", 8)
        if kv_count > spec.MAX_KVS:
            problem = f"KV count {kv_count} is past the {spec.MAX_KVS} modelmon reads"
            raise self.fail(f"{problem} (a damaged header?)", 16)
        # Each tensor info and each KV takes some bytes at least: counts the file cannot hold
        # mean a file cut short (a download that stopped), not a file to walk through.
        least = (
            spec.HEADER_SIZE
            + tensor_count * spec.MIN_TENSOR_INFO_SIZE
            + kv_count * spec.MIN_KV_SIZE
        )
        if least > self.size:
            tensors = f"{tensor_count} tensor{'s' if tensor_count != 1 else ''}"
            kvs = f"{kv_count} metadata key{'s' if kv_count != 1 else ''}"
            raise self.fail(
                f"truncated: its header lists {tensors} and {kvs}, which take at least "
                f"{least} bytes, but the file has {self.size}",
                8,
            )
        self.pos = spec.HEADER_SIZE
        return version, tensor_count, kv_count

    def kv_section(self, kv_count: int) -> None:
        # GGUFReader files the header's fields under these names first: a KV of the same name
        # is a duplicate to it, and it refuses the file.
        seen = set(spec.READER_HEADER_FIELDS)
        for index in range(kv_count):
            start = self.pos
            key = self.unique_text(f"KV #{index} key", "KV key", seen)
            value_type = self.u32(f"KV {show_name(key)} type")
            value_at = self.pos
            value = self.value(value_type, f"KV {show_name(key)}", keep=key in spec.KEPT_KEYS)
            if value_type == spec.ARRAY:
                self.kv_arrays[value_at] = self.pos - value_at
            if key == "general.alignment":
                if value_type != spec.UINT32 or not isinstance(value, int):
                    raise self.fail("general.alignment is not a UINT32", start)
                if value <= 0 or value & (value - 1):
                    raise self.fail(f"general.alignment {value} is not a power of two", start)
                self.alignment = value
            elif key in spec.KEPT_KEYS and value is not None:
                self.values[key] = value

    def value(self, value_type: int, what: str, keep: bool = False, depth: int = 0) -> object:
        """Check one KV value fits; return it if ``keep`` and it is a scalar or string."""
        if value_type in spec.SCALAR_FORMATS:
            scalar = self.unpack(spec.SCALAR_FORMATS[value_type], what)
            return scalar if keep else None
        if value_type == spec.STRING:
            start, length = self.string(what)
            if not keep:
                return None
            # Values are free text (only keys and names must be UTF-8): shown, never parsed.
            self.need(start + length)
            return self.buf[start : start + length].decode("utf-8", "replace")
        if value_type != spec.ARRAY:
            raise self.fail(f"{what} has unknown value type {value_type}", self.pos - 4)
        if depth >= spec.MAX_ARRAY_NESTING:
            raise self.fail(f"{what}: arrays nested more than {spec.MAX_ARRAY_NESTING} deep")
        item_type = self.u32(f"{what} item type")
        count_at = self.pos
        count = self.u64(f"{what} length")
        if item_type in spec.SCALAR_FORMATS:
            item_size = struct.calcsize(spec.SCALAR_FORMATS[item_type])
        elif item_type in (spec.STRING, spec.ARRAY):
            item_size = 8 if item_type == spec.STRING else 12  # the least each item can take
        else:
            raise self.fail(f"{what} has unknown item type {item_type}", count_at - 4)
        if count * item_size > self.size - self.pos:
            raise self.fail(f"absurd array length {count} in {what}", count_at)
        self.array_elements += count
        if self.array_elements > spec.MAX_ARRAY_ELEMENTS:
            raise self.fail(f"KV arrays hold over {spec.MAX_ARRAY_ELEMENTS} elements", count_at)
        if item_type in spec.SCALAR_FORMATS:
            self.skip(count * item_size, what)
        elif item_type == spec.STRING:
            self.skip_strings(count, what)
        else:
            for _ in range(count):
                self.value(item_type, what, depth=depth + 1)
        return None

    def skip_strings(self, count: int, what: str) -> None:
        """Step over ``count`` strings: the hot loop for a tokenizer vocabulary."""
        buf, size, length_format, pos = self.buf, self.size, self.order + "Q", self.pos
        for _ in range(count):
            if size - pos < 8:
                self.pos = pos
                self.u64(f"{what} string length")  # raises the usual truncation error
            if pos + 8 > self.have:
                self.need(pos + 8)
            (length,) = struct.unpack_from(length_format, buf, pos)
            if length > size - pos - 8:
                raise self.fail(f"{what}: string length {length} runs past the end", pos)
            pos += 8 + length
        self.pos = pos

    def tensor_info(self, index: int, names: set[str]) -> _RawInfo:
        start = self.pos
        name = self.unique_text(f"tensor #{index} name", "tensor name", names)
        n_dims = self.u32(f"tensor {show_name(name)} dimension count")
        if n_dims > spec.MAX_DIMS:
            problem = f"tensor {show_name(name)} has {n_dims} dimensions (max {spec.MAX_DIMS})"
            raise self.fail(problem, start)
        fields_at = self.skip(8 * n_dims + 12, f"tensor {show_name(name)} shape, type and offset")
        self.need(self.pos)
        *dims, type_number, relative_offset = struct.unpack_from(
            f"{self.order}{n_dims}QIQ", self.buf, fields_at
        )
        return name, start, type_number, tuple(dims), relative_offset

    def place(self, info: _RawInfo, data_start: int) -> TensorExtent:
        """Check one tensor's type, shape and extent against the file; describe it."""
        name, start, type_number, dims, relative_offset = info
        if type_number not in spec.QUANT:  # also the numbers ggml retired (Q4_2, Q4_3...)
            raise self.fail(f"tensor {show_name(name)} has unknown ggml type {type_number}", start)
        ggml_type, block_size, type_size = spec.QUANT[type_number]
        # ggml multiplies the dimensions (strides, element counts) in int64; a zero among them
        # does not save the products taken before it.
        if math.prod(d for d in dims if d) >= spec.INT64_LIMIT:
            raise self.fail(f"tensor {show_name(name)} has absurd shape {list(dims)}", start)
        row = dims[0] if dims else 1
        if row % block_size:
            problem = f"row of {row} is not a multiple of the {ggml_type.name} block size"
            raise self.fail(f"tensor {show_name(name)}: {problem} {block_size}", start)
        numeric = spec.NUMERIC.get(ggml_type)
        if numeric is None and not dims:  # no row to hold the blocks (GGUFReader fails too)
            problem = f"tensor {show_name(name)}: {ggml_type.name} with no dimensions"
            raise self.fail(problem, start)
        n_bytes = math.prod(dims) // block_size * type_size
        if relative_offset % self.alignment:
            problem = f"data offset {relative_offset} is not a multiple of the alignment"
            raise self.fail(f"tensor {show_name(name)}: {problem} {self.alignment}", start)
        offset = data_start + relative_offset
        if offset > self.size or n_bytes > self.size - offset:
            problem = f"data [{offset}, {offset + n_bytes}) runs past the end of the file"
            raise self.fail(f"tensor {show_name(name)}: {problem} ({self.size} bytes)", start)
        # The array a loader hands out, as GGUFReader shapes it: numpy order (ne0 last), in
        # the file's byte order; block types as rows of bytes.
        array_shape = dims[::-1]
        if numeric is not None:
            array_dtype = np.dtype(self.order + numeric).str
        else:
            array_dtype = "|u1"
            array_shape = (*array_shape[:-1], row // block_size * type_size)
        unallocatable = array_shape_problem(array_shape, np.dtype(array_dtype).itemsize)
        if unallocatable is not None:
            raise self.fail(f"tensor {show_name(name)}: {unallocatable}", start)
        return TensorExtent(
            name=name,
            file=self.file,
            offset=offset,
            length=n_bytes,
            dtype=ggml_type.name,
            shape=dims,
            block=block_of(name),
            array_dtype=array_dtype,
            array_shape=array_shape,
        )

    def check_overlaps(self, extents: list[TensorExtent]) -> None:
        by_offset = sorted(extents, key=lambda e: (e.offset, e.length))
        for before, after in itertools.pairwise(by_offset):
            if after.offset < before.end:
                problem = f"tensors {show_name(before.name)} and {show_name(after.name)} overlap"
                raise self.fail(problem, after.offset)

    def metadata(self, version: int, tensor_count: int, kv_count: int) -> dict[str, str]:
        """What ``Model.metadata`` shows: the header and the KEPT_KEYS, one short line each."""
        metadata = {
            "GGUF.version": str(version),
            "GGUF.tensor_count": str(tensor_count),
            "GGUF.kv_count": str(kv_count),
            "general.alignment": str(self.alignment),
        }
        for key, value in self.values.items():
            metadata[key] = " ".join(str(value).split())[: spec.MAX_METADATA_CHARS]
            if key == "general.file_type" and isinstance(value, int):
                with contextlib.suppress(ValueError):  # a file type newer than our gguf package
                    metadata[key] = LlamaFileType(value).name
        return metadata
