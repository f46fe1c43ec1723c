"""Group tensor names into blocks: one per layer, plus embeddings, head and other."""

from __future__ import annotations

import re
from collections.abc import Iterable

# "<prefix>.<container>.<N>." where container names a stack of layers in common checkpoints:
# model.layers.N (Llama, Mistral, Qwen), blk.N (GGUF), transformer.h.N (GPT-2, Falcon),
# encoder.layer.N (BERT), model.decoder.layers.N (OPT, Whisper), transformer.blocks.N (MPT),
# gpt_neox.layers.N, down_blocks.N / up_blocks.N (diffusers UNets), double_blocks.N (Flux).
_LAYER = re.compile(
    r"^(?P<stack>(?:[A-Za-z0-9_]+\.)*?(?:layers|layer|h|blk|blocks|block|down_blocks|up_blocks|"
    r"double_blocks|single_blocks|resblocks|transformer_blocks))\.(?P<index>\d+)(?:\.|$)"
)
_EMBEDDINGS = re.compile(
    r"(^|\.)(embed_tokens|embed_positions|embeddings?|wte|wpe|tok_embeddings|token_embd|"
    r"word_embeddings|position_embeddings|token_type_embeddings|embed_in|patch_embed|rope_freqs)"
    r"(\.|$)"
)
_HEAD = re.compile(
    r"(^|\.)(lm_head|output|output_norm|embed_out|classifier|head|score|final_layer_norm|"
    r"final_layernorm|ln_f|norm_out|pooler)(\.|$)|^(model\.)?norm\.(weight|bias)$"
)


_DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")


def block_of(name: str) -> str:
    """The block a tensor belongs to: ``model.layers.3``, ``blk.3``, or a named group."""
    match = _LAYER.match(name)
    if match:
        return f"{match.group('stack')}.{int(match.group('index'))}"
    if _EMBEDDINGS.search(name):
        return "embeddings"
    if _HEAD.search(name):
        return "head"
    return "other"


def blocks_of(names: Iterable[str]) -> list[str]:
    """``[block_of(name) for name in names]``, fast when neighbours share their layer.

    When the layer pattern matches a name up to a dot (``model.layers.3.``), it matches every
    name that begins with that text the same way: the match never looked past it. Names in
    file order come in runs of one layer, so most need only a ``startswith``.
    """
    blocks: list[str] = []
    layer_prefix, layer_block = None, ""
    # A name that is no layer's has the block of every name that differs from it only in its
    # digits' values (no pattern looks at them): "expert.7.w" answers for "expert.8.w".
    no_layer: dict[str, str] = {}
    for name in names:
        if layer_prefix is not None and name.startswith(layer_prefix):
            blocks.append(layer_block)
            continue
        skeleton = name.translate(_DIGITS_AS_ZERO)
        known = no_layer.get(skeleton)
        if known is not None:
            blocks.append(known)
            continue
        match = _LAYER.match(name)
        if match is None:
            block = no_layer[skeleton] = block_of(name)
            blocks.append(block)
            continue
        layer_block = f"{match.group('stack')}.{int(match.group('index'))}"
        matched = match.group()
        layer_prefix = matched if matched.endswith(".") else None
        blocks.append(layer_block)
    return blocks


def block_sort_key(block: str) -> tuple[int, str, int]:
    """Embeddings first, then layers by number, then head, then other."""
    if block == "embeddings":
        return (0, "", 0)
    if block == "head":
        return (2, "", 0)
    if block == "other":
        return (3, "", 0)
    stack, _, index = block.rpartition(".")
    return (1, stack, int(index) if index.isdigit() else 0)
