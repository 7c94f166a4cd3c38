"""The exporters in a repro.py: the source module to ONNX through torch.onnx, as convsmith called it."""
import os
import warnings

import onnx
import torch

from fuzzer.cases.harness.head import DYNAMIC, HERE, INPUT_NAMES, OPTIONS, OUTPUT_NAMES


def dynamic_axes():
    """torch.onnx.export's dynamic_axes for DYNAMIC: every marked input and output axis by its dim's name."""
    axes = {}
    for dim in DYNAMIC["dims"]:
        for name, axis in dim["axes"]:
            axes.setdefault(name, {})[axis] = dim["name"]
    for name, named in DYNAMIC["outputs"].items():
        axes.setdefault(name, {}).update({int(axis): dim for axis, dim in named.items()})
    return axes


def dynamic_shapes():
    """torch.export's dynamic_shapes for DYNAMIC: one Dim per dynamic dim, shared by its axes (Dim.AUTO for the
    leading-dim hints of a graph with no second shape); None for an input with no dynamic axis."""
    shapes = {name: {} for name in INPUT_NAMES}
    for dim in DYNAMIC["dims"]:
        auto = not DYNAMIC["exact"]
        spec = torch.export.Dim.AUTO if auto else torch.export.Dim(dim["name"], min=dim["min"], max=dim["max"])
        for name, axis in dim["axes"]:
            shapes[name][axis] = spec
    return tuple(shapes[name] or None for name in INPUT_NAMES)


def export_script(module, inputs, opset, constant_folding=True, script_module=False, dynamic=False):
    import io

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if script_module:
            module = torch.jit.trace(module, tuple(inputs), check_trace=False)
        buffer = io.BytesIO()
        torch.onnx.export(module, tuple(inputs), buffer, dynamo=False, opset_version=opset,
                          input_names=list(INPUT_NAMES), output_names=list(OUTPUT_NAMES),
                          do_constant_folding=constant_folding, dynamic_axes=dynamic_axes() if dynamic else None)
    return onnx.load_from_string(buffer.getvalue())


def export_dynamo(module, inputs, opset, optimize=True, dynamic=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, tuple(inputs), dynamo=True, optimize=optimize, opset_version=opset,
                                    input_names=list(INPUT_NAMES), output_names=list(OUTPUT_NAMES), verbose=False,
                                    dynamic_shapes=dynamic_shapes() if dynamic else None)
    return program.model_proto


def upstream_by_script(module, inputs):
    """The model an ONNX-to-ONNX tool received: exported by the TorchScript-based exporter."""
    return export_script(module, inputs, OPTIONS["opset"])


def upstream_by_dynamo(module, inputs):
    """The model an ONNX-to-ONNX tool received: exported by the dynamo-based exporter."""
    return export_dynamo(module, inputs, OPTIONS["opset"])


def upstream_as_saved(module, inputs):
    """The model an ONNX-to-ONNX tool received: written by convsmith straight from the graph, saved in the case."""
    return onnx.load(os.path.join(HERE, "upstream.onnx"))


def export_upstream(module, inputs):
    """The model an ONNX-to-ONNX tool received: the script defines it as one of the above, the one the case's
    upstream names (Converter.repro_upstream_export; upstream_as_saved for the native model)."""
    raise NotImplementedError(f"repro.py names no upstream export of {OPTIONS.get('upstream')}")
