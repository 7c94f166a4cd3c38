"""The check: one graph (or a settled source) through one converter, judged by the oracle, followed up."""
