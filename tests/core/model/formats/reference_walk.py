"""The reference's reading of a safetensors header, entry by entry: what the whole-column
passes of ``safetensors_members`` and ``safetensors_columns`` (and the writers'-form scan of
``safetensors_scan``) stand for, written as the reference's walk is (safetensors'
``SafeTensors::read_metadata`` and ``validate``): every member in file order, the last entry of
a name kept; then the tensors in offset order. The first problem met raises.

It words its problems with the parser's own functions (``checked_member``, ``range_problem``,
``layout_problem``, ``coverage_problem``): what it checks is which tensor is met first.
"""

from __future__ import annotations

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats.safetensors_columns import (
    Entry,
    TensorColumns,
    coverage_problem,
    layout_problem,
    range_problem,
)
from modelmon.core.model.formats.safetensors_json import HeaderProblem, decode
from modelmon.core.model.formats.safetensors_members import checked_member


def reference_walk(
    file: str, text: str, data_start: int, data_len: int
) -> tuple[TensorColumns, dict[str, str]]:
    """The tensors in offset order and the metadata of a header's JSON ``text``, or the
    ModelFormatError of its first problem."""
    try:
        document = decode(text, exact=True)
    except HeaderProblem as exc:
        raise ModelFormatError(file, exc.problem, 8 + (exc.at or 0)) from None
    if type(document) is not tuple:
        raise ModelFormatError(file, "header JSON is not an object", 8)
    metadata: dict[str, str] | None = None
    by_name: dict[str, Entry] = {}
    for key, info in document:
        checked = checked_member(file, key, info, metadata is not None)
        if isinstance(checked, dict):
            metadata = checked
        else:
            by_name[key] = checked  # a name given again: the last counts
    entries = sorted((e[3], e[4], e[0], e[1], e[2]) for e in by_name.values())
    for begin, end, key, _, _ in entries:
        problem = range_problem(file, key, (begin, end), data_start, data_len)
        if problem is not None:
            raise problem
    expected_begin = 0
    for begin, end, key, dtype, shape in entries:
        problem = layout_problem(file, expected_begin, (key, dtype, shape, begin, end), data_start)
        if problem is not None:
            raise problem
        expected_begin = end
    problem = coverage_problem(file, expected_begin, data_start, data_len)
    if problem is not None:
        raise problem
    rows = ((key, dtype, shape, begin, end) for begin, end, key, dtype, shape in entries)
    return TensorColumns.of(rows), metadata or {}
