"""The partitioner: split a graph across the selected backends.

``annotate`` → ``assign`` → ``merge_regions`` → ``return_small_regions`` →
``find_transfers`` → ``fit_memory``, packaged as :func:`partition_graph`, which returns a
:class:`Partition` with its report::

    from hetero.core.plugin import bind, get_backend
    part = partition_graph(graph, [bind(get_backend(name), options) for name in targets])
    print(part.report())
    for region in part.regions:
        sub = part.subgraph(region)   # what that region's backend compiles
"""

from hetero.core.partition.annotate import Annotation, Composite, annotate
from hetero.core.partition.assign import POLICIES, Assignment, Choice, Pin, assign
from hetero.core.partition.fit import fit_memory, plan_partition_memory
from hetero.core.partition.partition import (
    BY_DECLARATION, CompileUnit, Partition, choose_fallback, partition_graph,
)
from hetero.core.partition.regions import (
    DEFAULT_MIN_RATIO,
    Region,
    merge_regions,
    quotient_graph,
    return_small_regions,
)
from hetero.core.partition.transfers import Transfer, find_transfers

__all__ = [
    "BY_DECLARATION", "DEFAULT_MIN_RATIO", "POLICIES", "Annotation", "Assignment", "Choice", "CompileUnit",
    "Composite", "Partition", "Pin", "Region", "Transfer", "annotate", "assign", "choose_fallback",
    "find_transfers", "fit_memory", "merge_regions", "partition_graph", "plan_partition_memory", "quotient_graph",
    "return_small_regions",
]
