"""The operator catalogue: one module per family, each with an OPS list (see generators/registry.py)."""
