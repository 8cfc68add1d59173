"""Puts this folder on the path, so tests import the shared functions of schedcheck.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
