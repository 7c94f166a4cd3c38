"""What a worker tests: one decision per (unit, converter), taken in decide.py and nowhere else in the worker.

The decision reads what the campaign knows and says: test the graph, test it with the operators of filed bugs cut
out, or skip it and why. The worker follows it and records it (the skip's label, or the run's labels) in the test's
result. What it reads is computed here too, from the filed root causes: which (operator, dtype) pairs and culprits to
demote (novelty.py), the operators or traits that cover a bug whose error names none (spread.py), cutting an
operator out (culprit_cut.py), a dtype's opset (settings.py), the traits of graphs and tests (traits.py,
tested_traits.py, model_traits.py), operators drawn more often for rewrites not yet fired (steering.py) and the
upstream exporter an ONNX tool starts from (upstream_fallback.py). docs/policy.md has the tuned constants.
"""
