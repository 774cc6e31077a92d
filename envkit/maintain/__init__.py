"""Manifest maintenance for admins: ``envkit manifests validate | check | diff``.

validate reads a whole manifests directory and reports every problem at once; check asks the real package indexes
and conda channels (through the user's mirrors) whether every build can install; diff shows what an edit changes
for real machines. Nothing here is imported by the other commands.
"""
