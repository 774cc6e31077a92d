"""The pick: which builds of a manifest run on a machine (``resolve.py``) or on every machine of a fleet, and how
to split a fleet that no GPU build fits (``fleet_resolve.py``), why a machine with GPUs gets a CPU build
(``cpu_fallback.py``), the build each partition of the site file gets (``site_builds.py``), and their text and JSON
(``render.py``, ``render_fleet.py``). Pure functions: a catalog and machine profiles in, ranked candidates with their
reasons out."""
