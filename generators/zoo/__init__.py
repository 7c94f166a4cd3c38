"""The zoo: real architectures at small sizes with seeded random weights, each one declared entry (never a
download). The registry (`generators.zoo.registry.ZOO`) gathers the ENTRIES of every family module."""

from generators.zoo.entry import ZooEntry, ZooModel, ZooUnavailable
from generators.zoo.spec import Family, Framework, InputKind, InputSpec, ToleranceClass

__all__ = ["Family", "Framework", "InputKind", "InputSpec", "ToleranceClass", "ZooEntry", "ZooModel",
           "ZooUnavailable"]
