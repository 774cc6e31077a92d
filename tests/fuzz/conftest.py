"""Hypothesis's example budgets: a fixed one for CI and everyday runs (the default), a long one for developers:

    HYPOTHESIS_PROFILE=long python -m pytest -q tests/fuzz

Neither has a deadline (an example is judged by what it returns or raises, never by how long it took) nor an example
database: nothing is written outside temporary directories."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=5000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
