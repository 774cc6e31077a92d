"""The post-install check: a stdlib-only probe script (script.py, package data) run by an environment's own Python,
its runner (runner.py), what it reported (result.py), the diagnosis rules (diagnose.py), and the report's text and
JSON (render.py). Nothing is imported here: ``envkit list`` must not pay for it."""
