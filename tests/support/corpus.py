"""Where the shared corpus (`../shared/corpus/` from the project's root: public definitions
written by others) is: `FSMHARNESS_CORPUS` if set, else beside the checkout, else the
workplace's own `/work/shared/corpus` (a clean clone elsewhere, as CI makes, still finds it)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _found() -> Path:
    given = os.environ.get("FSMHARNESS_CORPUS")
    if given:
        return Path(given)
    for candidate in (ROOT.parent / "shared" / "corpus", Path("/work/shared/corpus")):
        if candidate.is_dir():
            return candidate
    return ROOT.parent / "shared" / "corpus"


#: the corpus folder (it may be absent: tests that read it skip, saying where they looked)
CORPUS = _found()
