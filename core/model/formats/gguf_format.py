"""The GGUF format's numbers as modelmon's walk uses them: the header's layout, the value
types, the ggml quantization table, and the bounds on the work one header can cause."""

from __future__ import annotations

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

HEADER_SIZE = 24  # magic u32, version u32, tensor_count u64, kv_count u64
SUPPORTED_VERSIONS = (2, 3)  # what GGUFReader reads; v1 had 32-bit counts
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS: llama.cpp rejects more
MAX_ARRAY_NESTING = 4  # real files nest 1 level
# Should the library strategy's array-skipping hook ever be unavailable, GGUFReader keeps one
# numpy view (~860 bytes) per KV array element; this cap bounds that cost. Real files hold
# < 1.5M elements in all.
MAX_ARRAY_ELEMENTS = 1 << 22
# Bounds on what one header can make modelmon do. Real files hold hundreds to a few thousand
# tensors and under a hundred KVs; a safetensors header's 100 MB limit allows about two
# million tensors. Past these, a count is damage: GGUFReader would make ~20 numpy objects per
# tensor or KV (minutes, gigabytes) and llama.cpp one ggml tensor each, before any error.
MAX_TENSORS = 1 << 21
MAX_KVS = 1 << 20
MIN_TENSOR_INFO_SIZE = 24  # name length u64 + n_dims u32 + type u32 + offset u64
MIN_KV_SIZE = 13  # key length u64 + value type u32 + a 1-byte value
INT64_LIMIT = 1 << 63  # ggml's ne[] are int64, and so are their products
# A GGUF read over the network is read from its start as far as the walk goes (a prefix that
# grows): past this, a header is damage, and modelmon would rather refuse it than download
# the object. Real headers, a tokenizer's vocabulary included, take a few MB.
MAX_REMOTE_HEADER = 256 << 20
GROWTH_STEP = 16 << 20  # the most a prefix grows by beyond what the walk asked for
FIRST_READ = 1 << 20  # what the prefix starts with (the object's first GET holds it)

READER_HEADER_FIELDS = ("GGUF.version", "GGUF.tensor_count", "GGUF.kv_count")
KEPT_KEYS = ("general.architecture", "general.name", "general.file_type", "general.alignment")
MAX_METADATA_CHARS = 200

UINT32, STRING, ARRAY = 4, 8, 9
SCALAR_FORMATS = dict(zip((0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12), "BbHhIif?Qqd", strict=True))
# ggml type number → (type, elements per block, bytes per block): the quantization table.
QUANT = {int(t): (t, block, size) for t, (block, size) in GGML_QUANT_SIZES.items()}
# The ggml types GGUFReader hands out as numbers (any other type: rows of raw block bytes).
NUMERIC = {
    GGMLQuantizationType.F16: "f2",
    GGMLQuantizationType.F32: "f4",
    GGMLQuantizationType.F64: "f8",
    GGMLQuantizationType.I8: "i1",
    GGMLQuantizationType.I16: "i2",
    GGMLQuantizationType.I32: "i4",
    GGMLQuantizationType.I64: "i8",
}
