"""Makes the tiny-model builders in this folder (`quant_models`) importable by the tests beside them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).parent))  # appended: `conftest` must stay tests/conftest.py
