"""envkit: GPU-aware Conda/pip environments that really run on this machine."""

__version__ = "0.1.0"
# The name pip, pipx and uv know this distribution by ("envkit" on PyPI is another project's).
DISTRIBUTION = "envkit-gpu"
