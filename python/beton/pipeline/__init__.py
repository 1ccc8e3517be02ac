"""FFCV's ``ffcv.pipeline``: ``Operation`` (a custom stage), ``State``, ``AllocationQuery``,
``Compiler``, ``Pipeline`` and ``PipelineSpec``. beton runs operations on whole batches after
its native stage (``beton.pipeline.operation.BatchStage``)."""

from beton.pipeline.allocation_query import AllocationQuery
from beton.pipeline.compiler import Compiler
from beton.pipeline.operation import Operation
from beton.pipeline.pipeline import Pipeline
from beton.pipeline.pipeline_spec import PipelineSpec
from beton.pipeline.state import State

__all__ = ["Pipeline", "PipelineSpec", "Compiler", "Operation", "State", "AllocationQuery"]
