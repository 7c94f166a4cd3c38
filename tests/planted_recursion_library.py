"""A stand-in for a converter library that lifts Python's recursion limit on import, as onnx2tf does
(`sys.setrecursionlimit(2147483647)` at the top of onnx2tf/onnx2tf.py): imported by the fork server and workers of
a test campaign through a planted converter's `libraries`."""

import sys

sys.setrecursionlimit(2**31 - 1)
