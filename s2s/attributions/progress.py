"""How a long attribution says how far it is: `on_progress(share done, what it is doing)`."""
from __future__ import annotations

from typing import Callable

PROGRESS_CHUNKS = 8       # integrated gradients and leave-one-out report progress this many times a round
Progress = Callable[[float, str], None]     # on_progress(share done, what it is doing)
