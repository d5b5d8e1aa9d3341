"""`python -m tfm` runs the command-line interface."""

from tfm.cli import main

main()
