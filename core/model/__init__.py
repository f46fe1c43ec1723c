"""The model: records, formats (one validating walk each), blocks, load plan.

Its face: the reference syntaxes (``hf:``, ``ollama:``), the demo models, a model's load
plan, and what a test model's header is made of."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelmon.core.faces import face

if TYPE_CHECKING:
    from modelmon.core.model.demo import RECIPE as DEMO_RECIPE
    from modelmon.core.model.demo import demo_models
    from modelmon.core.model.discovery import nothing_found
    from modelmon.core.model.formats import require_tensor_bytes
    from modelmon.core.model.plan import coalesce, partition
    from modelmon.core.model.references import HF_SCHEME, HF_SYNTAX, OLLAMA_SCHEME, OLLAMA_SYNTAX
    from modelmon.core.model.synth import encode_safetensors_header

_EXPORTS = (
    ("modelmon.core.model.formats", "require_tensor_bytes"),
    ("modelmon.core.model.plan", "partition coalesce"),
    ("modelmon.core.model.discovery", "nothing_found"),
    ("modelmon.core.model.references", "HF_SCHEME HF_SYNTAX OLLAMA_SCHEME OLLAMA_SYNTAX"),
    ("modelmon.core.model.demo", "demo_models DEMO_RECIPE=RECIPE"),
    ("modelmon.core.model.synth", "encode_safetensors_header"),
)
__all__, __getattr__, __dir__ = face("modelmon.core.model", _EXPORTS, globals())
