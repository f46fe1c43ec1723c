"""The bench's typed records to JSON and back, by their annotations: results.json (and
``--render`` of it), the jobs and results of the hdd child, the memory child's report.

``to_json`` is ``dataclasses.asdict``; ``from_json(kind, data)`` rebuilds a record of
``kind`` field by field from the types its class declares (records, lists, tuples, dicts of
str keys, optionals, literals, primitives; ``Any`` as it is). A field the data lacks takes the
record's default; a value of the wrong type is a ``TypeError`` naming the field.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

T = TypeVar("T")


def to_json(record: Any) -> Any:
    """A record (or a list or dict of them) as plain JSON values."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return dataclasses.asdict(record)
    if isinstance(record, list | tuple):
        return [to_json(item) for item in record]
    if isinstance(record, dict):
        return {key: to_json(value) for key, value in record.items()}
    return record


def from_json(kind: type[T], data: Any) -> T:
    """``data`` (what ``to_json`` made) as a ``kind``."""
    return typing.cast(T, _read(kind, data, kind.__name__))


def _read(kind: Any, data: Any, where: str) -> Any:
    origin, args = get_origin(kind), get_args(kind)
    if kind is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return _read(option, data, where)
            except TypeError as exc:
                errors.append(str(exc))
        raise TypeError("; ".join(errors))
    if origin is typing.Literal:
        if data not in args:
            raise TypeError(f"{where}: {data!r} is not one of {args}")
        return data
    if origin is list or origin is tuple:
        if not isinstance(data, list | tuple):
            raise TypeError(f"{where}: a list was expected, not {data!r}")
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            kinds = [args[0]] * len(data)
        elif len(args) == len(data):
            kinds = list(args)
        else:
            raise TypeError(f"{where}: {len(args)} items were expected, not {len(data)}")
        items = [
            _read(k, x, f"{where}[{i}]") for i, (k, x) in enumerate(zip(kinds, data, strict=True))
        ]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(data, dict):
            raise TypeError(f"{where}: an object was expected, not {data!r}")
        return {key: _read(args[1], value, f"{where}.{key}") for key, value in data.items()}
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            raise TypeError(f"{where}: an object was expected, not {data!r}")
        hints = get_type_hints(kind)
        given = {
            field.name: _read(hints[field.name], data[field.name], f"{where}.{field.name}")
            for field in dataclasses.fields(kind)
            if field.init and field.name in data
        }
        return kind(**given)
    if kind is float and isinstance(data, int | float) and not isinstance(data, bool):
        return float(data)
    if (
        kind in (int, str, bool)
        and isinstance(data, kind)
        and (kind is bool) == (type(data) is bool)
    ):
        return data
    raise TypeError(f"{where}: {data!r} is not a {getattr(kind, '__name__', kind)}")
