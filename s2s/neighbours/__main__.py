"""python -m s2s.neighbours: the command (s2s/neighbours/cli.py)."""
import sys

from .cli import main

sys.exit(main())
