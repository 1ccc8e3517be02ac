"""FFCV's pipeline classes, for FFCV-style custom operations (``Operation`` subclasses), which
beton runs as batch-level stages after its native stage."""

from beton.pipeline.allocation_query import AllocationQuery
from beton.pipeline.compiler import Compiler
from beton.pipeline.operation import Operation
from beton.pipeline.state import State

__all__ = ["Operation", "State", "AllocationQuery", "Compiler"]
