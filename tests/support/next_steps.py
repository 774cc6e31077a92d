"""The next-step lines envkit prints (`  Or run in it: envkit run site:torch -- python your_script.py`, "run
`envkit verify NAME` to check it"), taken out of its output so that a test can run each one as a user would paste
it."""

from __future__ import annotations

import re

# A labelled line of create's "how to use it" block, and a command quoted in a sentence.
_LABELLED = re.compile(r"^\s+(?:Load it|Activate it|Or run in it|Check a node|Or as a job):\s+(\S.*)$")
_QUOTED = re.compile(r"`((?:envkit|module|source) [^`]+)`")


def next_steps(text: str) -> list[str]:
    """Every command ``text`` tells its reader to run, in order."""
    out = []
    for line in text.splitlines():
        labelled = _LABELLED.match(line)
        if labelled:
            out.append(labelled.group(1).strip())
        else:
            out += _QUOTED.findall(line)
    return out
