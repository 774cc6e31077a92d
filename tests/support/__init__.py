"""Test infrastructure shared by the test suites: real local package sources (a conda channel, a Python index)."""
