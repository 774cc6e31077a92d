"""Text read from another program (a GPU's name from NVML or nvidia-smi, a partition or node name from sinfo, a line
of an installer's output, a name in a profile file) made safe for a terminal: its control characters escaped, so
that none of it can move the cursor, clear the screen, set the window's title or hide what follows.

``printable(text)`` escapes C0 controls (except a tab, and a newline where ``lines=True``), DEL, the C1 controls
(``\\x9b`` is a CSI on many terminals) and the bidirectional overrides that reorder what is shown, as Python writes
them: ``\\x1b``, ``\\u202e``. Plain text, the common case, is returned as it is, without a copy.
"""

from __future__ import annotations

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def _unsafe(char: str, lines: bool) -> bool:
    code = ord(char)
    if code < 0x20:
        return not (char == "\t" or (lines and char == "\n"))
    return 0x7F <= code <= 0x9F or char in _BIDI


def printable(text: str, lines: bool = False) -> str:
    """``text`` with every control character escaped (``\\x1b]0;title\\x07`` -> ``\\x1b]0;title\\x07`` as visible
    characters); newlines kept when ``lines``."""
    if text.isprintable() or not any(_unsafe(char, lines) for char in text):
        return text
    return "".join(repr(char)[1:-1] if _unsafe(char, lines) else char for char in text)


def pseudo_terminal(columns: int = 160) -> tuple[int, int]:
    """A new pseudo-terminal ``columns`` wide: (its master, its slave) file descriptors, for a child to draw its
    progress on (the slave, as its stderr) and envkit to read (the master)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return master, slave
