"""The load package's tests use the serving tests' server helpers and the fake OpenAI server."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "serve"))
sys.path.insert(0, str(Path(__file__).parent.parent / "llm"))
sys.path.insert(0, str(Path(__file__).parent))
