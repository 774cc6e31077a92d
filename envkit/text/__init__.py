"""What envkit writes for people and scripts, pure and with the standard library only: counts and values in words
(``words.py``), colour that carries meaning (``colour.py``), another program's text made safe for a terminal
(``terminal.py``), credentials masked in URLs (``redact.py``), and the version of every ``--json`` output
(``jsonout.py``)."""
