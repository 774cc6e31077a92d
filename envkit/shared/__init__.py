"""Environments a site shares: published by admins into one shared directory, read by every user, loaded as modules.

``layout.py`` says where everything lives in the shared directory and how its names read (``site:NAME``);
``access.py`` who may publish there and whether the directory is safe to publish into; ``store.py`` reads the
published records and writes files there (one function, so that every write is a temporary file and a rename,
never through a link); ``publish.py`` makes a new version everyone can read and points the stable name at it, and
retires old ones; ``find.py`` finds the shared directory and ``site:NAME`` for a command; ``render.py`` is their
section of `envkit envs`; ``modulefile.py`` writes the modulefiles themselves (Lua and Tcl, pure).
"""
