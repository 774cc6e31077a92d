"""What an environment is for, as its record keeps it: the machines (profile files, a partition, a fleet) it was
made for when not the machine it was made on. Pure.

The record's ``target``::

    {"options": ["--machine", "/abs/deepnine.yaml", ...],   # the options that named them, reusable as they are
     "machines": ["deepnine", "deepten"],
     "nodes": 24,                                           # only where a site file entry stands for several nodes
     "profiles": [{"machines": ["deepnine"], "profile": {...}}, ...]}   # one per distinct configuration

The profiles are kept, not just the options, so that a check judges against what the environment was made for
even after the profile files moved or the site file changed. A record without ``target`` (older records, and
environments made for the machine they were made on) is for that machine.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from envkit.errors import BadInputError
from envkit.machines.fleet import Fleet, Machine, profile_key
from envkit.machines.profile import MachineProfile, profile_from_dict


def target_dict(fleet: Fleet, options: Sequence[str]) -> dict[str, Any]:
    nodes = {"nodes": fleet.node_count} if fleet.counts_nodes else {}
    return {
        "options": list(options),
        "machines": list(fleet.names),
        **nodes,
        "profiles": [{"machines": list(config.names), "profile": config.profile.to_dict()}
                     for config in fleet.configs()],
    }


def target_fleet(target: Any, origin: str) -> Fleet:
    """The fleet a record's target describes; BadInputError (exit 2) naming the record when it is damaged."""
    try:
        machines = []
        for entry in target["profiles"]:
            profile = profile_from_dict(entry["profile"], origin)
            for name in entry["machines"]:
                if not isinstance(name, str):
                    raise TypeError(name)
                machines.append(Machine(name=name, profile=profile))
    except (KeyError, TypeError, BadInputError):
        raise BadInputError(f"{origin}: its 'target' is damaged",
                            hint="Verify with --machine or --partition to record the target again.") from None
    if not machines:
        raise BadInputError(f"{origin}: its 'target' names no machine",
                            hint="Verify with --machine or --partition to record the target again.")
    return Fleet(tuple(machines))


def matching(fleet: Fleet, here: MachineProfile) -> Optional[Machine]:
    """The target machine this one is (the same facts), if any: a check here then is a check on the target. Its
    GPUs that CUDA_VISIBLE_DEVICES hides from this process count: hidden, they are still the target's (the check
    then says that they are hidden, rather than that it ran on another machine)."""
    whole = here.whole()
    key = profile_key(whole)
    return next((m for m in fleet.machines if profile_key(m.profile) == key and whole.gpus), None)
