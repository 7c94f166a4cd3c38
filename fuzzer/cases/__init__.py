"""Bug case folders: the case data, reading and writing, replay, repro.py and report.md, and whose bug it is."""
