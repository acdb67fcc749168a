"""``python -m elasim.cli``: the ``elasim`` command."""

from elasim.cli import main

main()
