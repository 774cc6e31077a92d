"""The site file: named partitions (or machine groups) and the profiles of the nodes in them.

``envkit survey`` (Slurm) writes it; an admin or a user can also write it by hand from saved ``envkit detect --json``
outputs. ``--partition NAME`` then targets that partition's profiles as a fleet. Format (YAML; JSON accepted too)::

    version: 1
    partitions:
      gpu-4-a100:
        surveyed: "2026-11-22T17:00:00Z"   # optional, ISO 8601 UTC, when survey last wrote it
        nodes:                             # one entry per distinct node configuration (or per node)
          - node: a100-01                  # Slurm node name (optional when hand-written)
            count: 12                      # optional, default 1 (at most 1,000,000): nodes of this configuration
            profile: {...}                 # inline machine profile exactly as `envkit detect --json` prints it
          - profile_file: v100-node.yaml   # OR a saved profile file, relative to the site file
        unreachable:                       # optional: what survey could not reach and why
          - {node: a100-07, reason: "timeout: the job did not start within 120 s (cancelled)"}
        error: "partition is down"         # optional: the whole partition could not be surveyed this time

Where it is: ``$ENVKIT_SITE``, else the config's ``site:`` key, else ``site.yaml`` in envkit's user config directory.
A missing file is an error only when a partition is asked for; an empty one is always an error (nothing writes one:
it is a truncated copy, not a site without partitions). Writing keeps the other partitions as they were
(``save_site(with_partition(load_site(path), partition), path)``), but not the comments of a hand-written file.

One job per module: :mod:`~envkit.site.model` (the Site, its Partitions and their entries, SiteError),
:mod:`~envkit.site.read` (where the file is, and reading it), :mod:`~envkit.site.select` (``--partition
NAME[:NODE,...]``, the entries and profiles chosen, their Slurm nodes) and :mod:`~envkit.site.write` (writing it back).
Their public names are imported from ``envkit.site`` itself.
"""

from envkit.site.model import (MAX_NODE_COUNT, SITE_VARIABLE, VERSION, Partition, Site, SiteError, SiteNode,
                               valid_name)
from envkit.site.read import load_site, site_from_dict, site_path
from envkit.site.select import (check_partition_name, get_partition, machine_names, not_a_slurm_node,
                                parse_partition_spec, partition_nodes, partition_profiles, slurm_node, unnamed_entry)
from envkit.site.write import save_site, site_to_dict, with_partition

__all__ = [
    "MAX_NODE_COUNT", "SITE_VARIABLE", "VERSION", "Partition", "Site", "SiteError", "SiteNode", "valid_name",
    "load_site", "site_from_dict", "site_path",
    "check_partition_name", "get_partition", "machine_names", "not_a_slurm_node", "parse_partition_spec",
    "partition_nodes", "partition_profiles", "slurm_node", "unnamed_entry",
    "save_site", "site_to_dict", "with_partition",
]
