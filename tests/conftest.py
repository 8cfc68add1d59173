"""Shared test setup: make the helpers in tests/ (oracle.py, models.py) importable."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
