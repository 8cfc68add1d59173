"""The canonical op set, one family a module. Importing this package registers them.

Each op is defined once, with :func:`hetero.core.ir.opdef.register`; see
:mod:`hetero.core.ir.opdef` for what a definition holds.
"""

from hetero.core.ir.ops import conv_pool, elementwise, nn, qint, quant, reduce, tensor  # noqa: F401
from hetero.core.ir.ops import indexing  # noqa: F401
from hetero.core.ir.ops import topk  # noqa: F401
from hetero.core.ir.ops import conv_transpose  # noqa: F401
from hetero.core.ir.ops import resize  # noqa: F401
from hetero.core.ir.ops import signal  # noqa: F401
from hetero.core.ir.ops import sample  # noqa: F401
from hetero.core.ir.ops import unpool  # noqa: F401
from hetero.core.ir.ops import rnn  # noqa: F401
from hetero.core.ir.ops import deform  # noqa: F401
from hetero.core.ir.ops import layout  # noqa: F401
