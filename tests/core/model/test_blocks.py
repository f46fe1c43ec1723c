"""Block names: ``blocks_of`` (runs of one layer named by a prefix test) names every tensor as
``block_of`` does, whatever the order and however a name resembles its neighbour's prefix."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from modelmon.core.model.blocks import block_of, blocks_of

NAMES = [
    "model.layers.3.self_attn.q_proj.weight",
    "model.layers.3.mlp.up_proj.weight",
    "model.layers.3",  # the layer match ends at the end, not at a dot
    "model.layers.3x.weight",  # a prefix of the layer-3 text, but no layer
    "model.layers.30.weight",  # begins with "model.layers.3" but is layer 30
    "model.layers.03.weight",
    "model.layers.3.\n",
    "model.layers.3\n",  # $ matches before a final newline
    "a.layers.x.h.4.w",  # the lazy prefix: the layer is h.4
    "layers.\u0663.w",  # an Arabic-Indic three is a digit to the pattern and to int()
    "blk.12.attn_q.weight",
    "model.embed_tokens.weight",
    "lm_head.weight",
    "model.norm.weight",
    "é.layers.2.w",
    "a..layers.2.w",
    "",
    "x",
]


def test_blocks_of_names_as_block_of_in_every_order() -> None:
    for names in itertools.permutations(NAMES[:7]):
        assert blocks_of(names) == [block_of(name) for name in names]
    for names in (NAMES, NAMES[::-1], sorted(NAMES), [], [""]):
        assert blocks_of(names) == [block_of(name) for name in names]
    assert blocks_of(NAMES[:3]) == ["model.layers.3"] * 3


COMPONENTS = st.sampled_from(
    ["model", "layers", "layer", "h", "blk", "3", "03", "12", "w", "x-y", ""]
)


@given(st.lists(st.lists(COMPONENTS, max_size=5).map(".".join), max_size=12))
def test_blocks_of_agrees_with_block_of(names: list[str]) -> None:
    assert blocks_of(names) == [block_of(name) for name in names]
