"""The process's entry: the `envkit` console script and ``python -m envkit``.

A command runs once and exits, so the garbage collector is tuned for that before anything is imported: young
objects are collected every 100,000 new ones instead of every 700 (CPython's default). Importing typer and the
command's group makes some 20,000 objects, and each collection walked the young ones again: about 8 ms of every
command (bench/list_startup.py). A long run still has its cycles collected. envkit.cli.main then freezes what was
imported, before the command runs.
"""

import gc

YOUNG_GENERATION_THRESHOLD = 100_000


def main() -> None:
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *gc.get_threshold()[1:])
    from envkit.cli import main as run_command_line

    run_command_line()


if __name__ == "__main__":
    main()
