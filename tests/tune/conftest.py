"""The tuner's tests import their model builder (tune_nets) from this folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
