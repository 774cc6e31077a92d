"""Running other programs: the one subprocess gateway (``process.py``: argv lists, time limits, bounded output,
process groups), SIGTERM and SIGHUP ending envkit as Ctrl-C does (``signals.py``), Python modules started so that
the working directory cannot stand in for them (``launch.py``), a command run inside an environment as activating it
would (``activation.py``), the transport rule held around every installer (``egress.py``), and scratch directories
that a killed envkit does not leave behind (``scratch.py``)."""
