#!/usr/bin/env python3
"""{title}

Standalone reproduction ({libs}; not convsmith). Run: python repro.py
Exit status: 0 the bug does not show, 1 it shows (the failure this case was filed for), 2 a file of the
case is missing or unreadable, 3 cannot run here (a library is missing), 4 it fails, but otherwise.
"""
import ctypes
import os
import sys
import traceback
import warnings

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    from onnx import numpy_helper
except Exception as exc:  # missing, or built against another numpy (a SystemError as it loads): not this bug
    print(f"repro.py: cannot run: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(3)

HERE = os.path.dirname(os.path.abspath(__file__))

# The case, as placeholders: each repro.py has its case's own values here.

CASE = "case"
SYMPTOM = "crash"
EXPECTED_ERROR = ""  # exception type name the bug raises (crash-like symptoms)
CONVERTER = "torch-onnx-script"
OPTIONS = {}
INPUT_NAMES = ()
OUTPUT_NAMES = ()
OUTPUT_DTYPES = ()
TOLERANCES = {}  # dtype: (rtol, atol)
DEVICE = "cpu"  # where convsmith ran the source model and the converted one
DYNAMIC = None  # the dims a dynamic export marks (None: a static export)
SECOND_SHAPE = False  # test_data_set_1 holds inputs at a second shape the dynamic model must run at too
DIVERGENCES = ()  # the target runs and its outputs are wrong: in shape, dtype or values
LOST = ()  # the conversion runs in a child, whose end is the evidence
CHILD_TIMEOUT_S = 600.0  # a child still converting then is a hang
MEMORY_MB = 0  # an out-of-memory case's child may grow by this much
ONNX_CHECKED = True  # the ONNX tool's model must pass ONNX's checker (False: it is for ONNX Runtime alone)
ORT_LEVELS = {}  # ONNX Runtime's levels by convsmith's names: the GraphOptimizationLevel member of each
