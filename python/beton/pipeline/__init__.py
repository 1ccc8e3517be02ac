"""FFCV's pipeline classes, for FFCV-style custom operations (``Operation`` subclasses), which
beton runs as batch-level stages after its native stage."""

from beton.pipeline.allocation_query import AllocationQuery
from beton.pipeline.compiler import Compiler
from beton.pipeline.operation import Operation
from beton.pipeline.state import State


class PipelineSpec:
    """FFCV's ``PipelineSpec(source, decoder, transforms)``: a pipeline over field ``source``
    under another name, e.g. ``pipelines={'image': [...], 'view2': PipelineSpec('image',
    RandomResizedCropRGBImageDecoder((224, 224)), [RandomHorizontalFlip()])}`` for two random
    crops of one image. Each view draws its own randomness."""

    def __init__(self, source: str, decoder=None, transforms=None):
        self.source = source
        self.decoder = decoder
        self.transforms = list(transforms or [])


__all__ = ["Operation", "State", "AllocationQuery", "Compiler", "PipelineSpec"]
