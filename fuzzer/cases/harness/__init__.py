"""The harness of a case's repro.py, as real Python: fuzzer/cases/assembly.py copies the definitions a case needs
from these modules into the script, with the case's values in place of head.py's placeholders.

Each module imports only the standard library, numpy, onnx, onnxruntime, torch and its sibling modules here; the
sibling imports let ruff and the tests check every name, and are never copied (a repro.py holds them all).
"""
