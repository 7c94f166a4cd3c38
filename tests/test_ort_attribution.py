"""ONNX Runtime's transformers each given what it matched: where several fire, by the model optimized with each one
disabled (real sessions on a generated graph of two fusion patterns)."""

from __future__ import annotations

from fuzzer.check.pipeline import check_prepared
from fuzzer.check.source import prepare
from fuzzer.converters import CONVERTERS
from generators.generator import GenOptions, generate


def test_each_fusion_gets_the_operators_it_fused_and_not_the_other_ones() -> None:
    graph = generate(3, GenOptions(nodes=3, include_ops=("pattern_conv_activation", "pattern_matmul_add"),
                                   dtypes=("float32",)))
    run = check_prepared(prepare(graph, 3, {}, 1.0), CONVERTERS["ort-optimizer"], {"level": "all"}).target
    assert run is not None and {"MatMulAddFusion", "ConvActivationFusion"} <= set(run.rewrites)
    matmul, activation = run.rewrite_classes["MatMulAddFusion"], run.rewrite_classes["ConvActivationFusion"]
    assert {"op:MatMul", "op:Add", "float32"} <= set(matmul) and "op:LeakyRelu" not in matmul
    assert "op:LeakyRelu" in activation and "op:MatMul" not in activation
    # Disabling the NCHWc transformer keeps nothing the others do not change too: it is given no classes.
    assert run.rewrite_classes.get("NchwcTransformer", ()) == ()
