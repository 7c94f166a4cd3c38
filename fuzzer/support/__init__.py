"""Shared ground of every wing: user errors, atomic files, devices, tensor conversions."""
