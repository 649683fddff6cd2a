"""python -m s2s.alignment: the command (s2s/alignment/cli.py)."""
import sys

from .cli import main

sys.exit(main())
