"""How a package of the engine shows its face: a few names, each imported on first use.

The root (``modelmon.core``) and the public modules beside it (``modelmon.core.output``,
``.system``, ``.storage``, ``.measuring``, ``.model``, ``.runs``) each list their names in
``_EXPORTS`` — ``(module, "name name=attribute ...")``, grouped by purpose — and take their
``__all__``, ``__getattr__`` and ``__dir__`` from ``face``. A name is imported when it is first
used (PEP 562), not with the package: the engine's modules bring numpy, the format libraries
and ctypes, and ``modelmon --version``, or a parser that needs only the option ranges, must
not pay for them. Type checkers read each package's ``TYPE_CHECKING`` imports of the same
names (``tests/core/test_api.py`` holds the two to each other).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

Exports = tuple[tuple[str, str], ...]


def where(exports: Exports) -> dict[str, tuple[str, str]]:
    """name -> (module, attribute): "name" is the module's own, "name=attribute" a module's
    ``attribute`` under the face's clearer name."""
    return {
        name: (module, attribute or name)
        for module, names in exports
        for name, _, attribute in (word.partition("=") for word in names.split())
    }


def face(
    package: str, exports: Exports, namespace: dict[str, Any]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` of ``package`` (whose globals are
    ``namespace``): each name imported from its module when first asked for, then kept."""
    found = where(exports)
    names = sorted(found)

    def __getattr__(name: str) -> Any:
        try:
            module, attribute = found[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), attribute)
        namespace[name] = value  # the next access does not come here
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return names, __getattr__, __dir__
