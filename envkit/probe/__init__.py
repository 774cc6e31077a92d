"""The post-install check: a stdlib-only probe program (program/, one module per framework) that envkit assembles into
a zipapp (zipapp.py) and runs with an environment's own Python (runner.py), what it reported (result.py), the facts
the diagnosis looks at (facts.py), how each known failure is recognised (matchers.py), the table of known failures
with their causes and next steps (rules.py), the verdict and report assembled from them (diagnose.py), the builds to
suggest (builds.py), and the report's text and JSON (render.py). Nothing is imported here: ``envkit list`` must not
pay for it."""
