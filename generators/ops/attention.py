"""Attention: F.scaled_dot_product_attention over query, key and value of one rank and batch."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from generators.dtypes import FLOATS
from generators.ops.base import AttrMap, Build, BuildContext, OpSpec, SymTensor, call, same_sigs
from generators.terms import eq


class ScaledDotProductAttention(OpSpec):
    """softmax(q @ k^T * scale [+ causal mask]) @ v: q [*, L, E], k [*, S, E], v [*, S, Ev] -> [*, L, Ev].

    The causal mask is aligned top-left: query row i sees keys 0..i, so every row sees at least one key."""

    name = "scaled_dot_product_attention"
    family = "attention"
    ranks = ((3, 4), (3, 4), (3, 4))
    sigs = same_sigs(FLOATS, 3)

    def build(self, ctx: BuildContext, q: SymTensor, k: SymTensor, v: SymTensor) -> Build | None:
        if not q.rank == k.rank == v.rank:
            return None
        batch = q.shape[:-2]
        reqs = [eq(a, b) for a, b in zip(batch, k.shape[:-2])] + [eq(a, b) for a, b in zip(batch, v.shape[:-2])]
        reqs += [eq(q.shape[-1], k.shape[-1]), eq(k.shape[-2], v.shape[-2])]
        attrs = {"is_causal": ctx.choice("is_causal", (False, True)), "scale": ctx.choice("scale", (None, 0.5))}
        return Build([SymTensor(batch + (q.shape[-2], v.shape[-1]), q.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=attrs["is_causal"], scale=attrs["scale"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.scaled_dot_product_attention", args, is_causal=attrs["is_causal"],
                    scale=attrs["scale"])


OPS: list[type[OpSpec]] = [ScaledDotProductAttention]
