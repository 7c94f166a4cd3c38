"""Distances and similarities between two tensors of vectors: cosine_similarity, pairwise_distance, cdist."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from generators.dtypes import FLOATS, INTS, DType
from generators.ops.base import (
    PROMOTES_TO_FLOAT,
    AttrMap,
    Build,
    BuildContext,
    OpSpec,
    SymTensor,
    broadcast,
    call,
    excluded,
    norm_axis,
    pick_axis,
    same_sigs,
)
from generators.terms import eq

P_NORMS = (2.0, 1.0, 3.0)  # p = 0 counts nonzeros (a jump at every zero) and inf is a max: both left out


class CosineSimilarity(OpSpec):
    """F.cosine_similarity(x1, x2, dim, eps): the inputs broadcast, `dim` of the broadcast shape is reduced."""

    name = "cosine_similarity"
    family = "distance"
    ranks = ((1, 2, 3, 4), (1, 2, 3, 4))
    sigs = same_sigs(FLOATS, 2)
    value_range = (-1.0, 1.0)

    def build(self, ctx: BuildContext, x1: SymTensor, x2: SymTensor) -> Build:
        shape, reqs = broadcast(x1.shape, x2.shape)
        dim = pick_axis(ctx, len(shape))
        out = tuple(d for i, d in enumerate(shape) if i != norm_axis(dim, len(shape)))
        return Build([SymTensor(out, x1.dtype)], reqs, {"dim": dim, "eps": ctx.choice("eps", (1e-8, 1e-3))})

    def forward(self, attrs: AttrMap, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return F.cosine_similarity(x1, x2, dim=attrs["dim"], eps=attrs["eps"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.cosine_similarity", args, dim=attrs["dim"], eps=attrs["eps"])


class PairwiseDistance(OpSpec):
    """F.pairwise_distance(x1, x2, p, eps, keepdim): the p-norm of x1 - x2 + eps over the last dim of the
    broadcast shape."""

    name = "pairwise_distance"
    family = "distance"
    ranks = ((1, 2, 3, 4), (1, 2, 3, 4))
    sigs = same_sigs(FLOATS, 2)
    dtype_exclusions = excluded(INTS, PROMOTES_TO_FLOAT)  # bools have no subtraction
    value_range = (0.0, float("inf"))

    def build(self, ctx: BuildContext, x1: SymTensor, x2: SymTensor) -> Build:
        shape, reqs = broadcast(x1.shape, x2.shape)
        keepdim = ctx.choice("keepdim", (False, True))
        out = shape[:-1] + ((1,) if keepdim else ())
        attrs = {"p": ctx.choice("p", P_NORMS), "eps": ctx.choice("eps", (1e-6, 0.0)), "keepdim": keepdim}
        return Build([SymTensor(out, x1.dtype)], reqs, attrs)

    def forward(self, attrs: AttrMap, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return F.pairwise_distance(x1, x2, p=attrs["p"], eps=attrs["eps"], keepdim=attrs["keepdim"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.nn.functional.pairwise_distance", args, p=attrs["p"], eps=attrs["eps"],
                    keepdim=attrs["keepdim"])


class Cdist(OpSpec):
    """torch.cdist(x1 [*, P, M], x2 [*, R, M], p) -> [*, P, R]: every pair of rows' p-norm distance (the batch dims
    equal)."""

    name = "cdist"
    family = "distance"
    ranks = ((2, 3), (2, 3))
    sigs = same_sigs((DType.FLOAT32, DType.FLOAT64), 2)
    value_range = (0.0, float("inf"))

    def build(self, ctx: BuildContext, x1: SymTensor, x2: SymTensor) -> Build | None:
        if x1.rank != x2.rank:
            return None
        reqs = [eq(a, b) for a, b in zip(x1.shape[:-2], x2.shape[:-2])] + [eq(x1.shape[-1], x2.shape[-1])]
        out = x1.shape[:-1] + (x2.shape[-2],)
        return Build([SymTensor(out, x1.dtype)], reqs, {"p": ctx.choice("p", P_NORMS)})

    def forward(self, attrs: AttrMap, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return torch.cdist(x1, x2, p=attrs["p"])

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call("torch.cdist", args, p=attrs["p"])


OPS: list[type[OpSpec]] = [CosineSimilarity, PairwiseDistance, Cdist]
