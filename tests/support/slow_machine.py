"""A reference machine that takes a little wall time per delivery: a campaign on it lasts long
enough for a test to kill a cluster worker in the middle (its results are the reference
machine's: the sleep changes no decision)."""

from __future__ import annotations

import time
from typing import Any

from harness import ReferenceMachine


class SlowMachine(ReferenceMachine):
    def deliver(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.003)
        return super().deliver(*args, **kwargs)
