"""envkit: GPU-aware Conda/pip environments that really run on this machine."""

__version__ = "0.1.0"
