"""conda-lock's unified lock format (``conda-lock.yml``, ``version: 1``) and envkit's uses of it.

``model`` holds the format as frozen dataclasses, ``format`` its one parser and one writer: no solver, no network.
How a lock is made (``make``), installed (``install``) and taken from an environment (``export``) lives beside them,
and each imports the format, never the other way round. None of it is imported on the `envkit list` path.
"""
