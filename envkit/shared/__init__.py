"""Environments a site shares: published by admins into one shared directory, read by every user, loaded as modules.

``layout.py`` says where everything lives in the shared directory and how its names read (``site:NAME``);
``access.py`` who may publish there and whether the directory is safe to publish into; ``tree.py`` makes and opens
its directories (modes set explicitly, never through a link) and writes its files; ``store.py`` reads the published
records; ``publish.py`` makes a new version everyone can read and points the stable name at it, and retires old
ones; ``leftovers.py`` marks a publication's run and removes what a dead one left; ``python.py`` finds a Python the
users can run for a shared venv and ``reach.py`` proves they can reach it (or says what stops them); ``find.py``
finds the shared directory and ``site:NAME`` for a command; ``render.py`` is their section of `envkit envs`;
``modulefile.py`` writes the modulefiles themselves (Lua and Tcl, pure).
"""
