"""Imported by the campaign's fork server, after the converters' libraries (Campaign.preloaded_libraries): pays their
one-time first-use costs there, once, so that every worker it forks starts warm.

A fresh worker's first TorchScript export and check took 70-100 ms more than the next ones: torch.onnx registers its
symbolic functions and ONNX loads its operator schemas on first use. A campaign at 5 nodes replaces a worker 6-10
times a minute (known exporter crashes kill it), so that cost recurred. Only libraries the fork server has already
imported are warmed, and nothing that starts a thread: a thread does not survive a fork, and a lock it held would stay
held in every worker (ONNX Runtime, whose sessions start thread pools, is left alone).
"""

from __future__ import annotations

import io
import sys
import warnings


def warm_onnx() -> None:
    """Load ONNX's operator schemas: the checker and shape inference each did on their first call (about 45 ms)."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "warm", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


def warm_torchscript_export() -> None:
    """One tiny export with the TorchScript exporter: it registers the symbolic functions of every opset."""
    import torch

    torch.set_num_threads(1)  # as confine() sets for each worker; never a thread pool in the fork server
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation notice
        torch.onnx.export(torch.nn.ReLU(), (torch.ones(2),), io.BytesIO(), dynamo=False)


def warm_start() -> None:
    """Warm each library the fork server holds; a failure only leaves the workers to warm up themselves."""
    try:
        if "onnx" in sys.modules:
            warm_onnx()
        if "torch.onnx" in sys.modules:
            warm_torchscript_export()
    except Exception as exc:  # never stop a campaign for an optimization
        print(f"convsmith: warming the fork server failed ({type(exc).__name__}: {exc}); workers start cold",
              file=sys.stderr, flush=True)


warm_start()
