"""Hypothesis's example budgets: a fixed one for CI and everyday runs (the default), a long one for developers:

    HYPOTHESIS_PROFILE=long python -m pytest -q tests/fuzz

Neither has a deadline (an example is judged by what it returns or raises, never by how long it took) nor an example
database: nothing is written outside temporary directories."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

# hypothesis keeps caches (the Unicode tables text() draws from) in .hypothesis/ of the working directory: here, a
# temporary directory, removed when the tests end
_HOME = tempfile.mkdtemp(prefix="envkit-hypothesis-")
set_hypothesis_home_dir(_HOME)
atexit.register(shutil.rmtree, _HOME, True)

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=5000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
