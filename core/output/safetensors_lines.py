"""The safetensors library's own lines for a local safetensors model, each a whole statement
that loads every tensor of every file when pasted (its imports in, the files by their whole
paths): the library's own read (``safe_open(framework='numpy').get_tensor`` of every tensor,
what ``load_file`` does and what modelmon's ``library`` strategy measures), the same read
into torch tensors where torch is installed here, and the read of each file whole (into
torch for types numpy's own parser does not know, where torch is here).

numpy has no bfloat16 or float8 of its own: a line whose arrays are of such types imports
ml_dtypes (which gives numpy its bfloat16) and, for float8, gives numpy the names
safetensors asks it for, as the ``library`` strategy does while it measures."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from modelmon.core.loading.strategies.library import FLOAT8_NAMES
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.model.records import Model
from modelmon.core.output.snippet import Snippet, stand_in

# numpy's own array types: any other (bfloat16, float8) comes from ml_dtypes
NUMPY_TYPES = {
    "float64",
    "float32",
    "float16",
    "complex64",
    "complex128",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint64",
    "uint32",
    "uint16",
    "uint8",
    "bool",
}


def torch_installed() -> bool:
    """Whether torch can be imported here (found, not imported: importing it takes seconds)."""
    return importlib.util.find_spec("torch") is not None


def numpy_imports(model: Model) -> str:
    """The statements a numpy load of ``model``'s tensors needs first, ending in "; "."""
    if all(e.array_dtype in NUMPY_TYPES for e in model.extents):
        return "import safetensors.numpy; "
    lent = sorted({FLOAT8_NAMES[e.dtype] for e in model.extents if e.dtype in FLOAT8_NAMES})
    names = "".join(f"numpy.{name} = ml_dtypes.{name}; " for name in lent)
    return f"import ml_dtypes, numpy, safetensors.numpy; {names}"


def _every_tensor(imports: str, module: str, read: str) -> str:
    """A statement that puts every tensor of every file of the model in ``tensors``."""
    return (
        f"{imports}tensors = {{name: tensor for path in PATHS for name, tensor in "
        f"{module}.{read}.items()}}"
    )


def _is_library_read(c: Candidate) -> bool:
    """A run of the library's own read into numpy: modelmon's ``library`` strategy, or the
    safetensors engine as it is (numpy, mapped)."""
    if c.program is not None and c.program.engine == "safetensors":
        settings = c.program.settings
        return settings.get("framework", "numpy") == "numpy" and settings.get("backend") in (
            None,
            "mmap",
        )
    return c.strategy == "library" and c.readers == 1


def _is_torch_read(c: Candidate) -> bool:
    if c.program is None or c.program.engine != "safetensors":
        return False
    settings = c.program.settings
    return settings.get("framework") == "torch" and settings.get("backend") in (None, "mmap")


def safetensors_snippets(model: Model, pool: tuple[Candidate, ...]) -> list[Snippet]:
    """The safetensors library's lines for ``model``, each measured by the candidate of
    ``pool`` that reads as it does, or said not measured here."""

    def line(tool: str, text: str, test: Callable[[Candidate], bool], note: str) -> Snippet:
        return Snippet.of(tool, text, model, stand_in(pool, test), note=note)

    numpy = numpy_imports(model)
    torch = torch_installed()
    arrays = "numpy arrays" + ("" if torch else " (torch is not installed here)")
    out = [
        line(
            "safetensors",
            _every_tensor(numpy, "safetensors.numpy", "load_file(path)")
            + f"  (safe_open(framework='numpy').get_tensor of every tensor: {arrays})",
            _is_library_read,
            "",
        )
    ]
    if torch:
        out.append(
            line(
                "safetensors-torch",
                _every_tensor("import safetensors.torch; ", "safetensors.torch", "load_file(path)")
                + "  (the same read into torch tensors: torch is installed here)",
                _is_torch_read,
                "the safetensors line's read, into torch tensors",
            )
        )
    # safetensors.numpy.load parses the bytes itself and knows numpy's own types only: a
    # model of bfloat16 or float8 is read whole into torch tensors, where torch is here.
    whole = all(e.array_dtype in NUMPY_TYPES for e in model.extents)
    if whole or torch:
        module, kind = ("safetensors.numpy", arrays) if whole else ("safetensors.torch", "torch")
        out.append(
            line(
                "safetensors-read",
                _every_tensor(
                    f"import pathlib, {module}; ", module, "load(pathlib.Path(path).read_bytes())"
                )
                + f"  (each file read whole, no mmap: {kind}"
                + ("" if whole else " tensors, as numpy's load has no type for its own")
                + ")",
                lambda c: c.strategy == "sequential" and c.readers == 1,
                "",
            )
        )
    return out
