"""`convsmith check MODEL`: a user's own model (an ONNX file, a PyTorch factory, a zoo entry) through the converters,
the first wrong node located, the fault diagnosed by kind, and the converted model repaired and re-verified."""
