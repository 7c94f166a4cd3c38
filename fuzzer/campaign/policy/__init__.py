"""What a worker tests: one decision per (unit, converter), taken here and nowhere else in the worker.

The decision reads what the campaign knows (the filed root causes' culprits and traits it demoted, the probe's
unsupported pairs, the settings a known bug demoted, what the converter's framework can express) and says: test the
graph, test it with the operators of filed bugs cut out, or skip it and why. The worker follows it and records it
(the skip's label, or the run's labels) in the test's result: fuzzer/campaign/policy/decide.py.
"""
