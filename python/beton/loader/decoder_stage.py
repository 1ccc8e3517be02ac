"""FFCV-style Python decoders, of the fields of a custom type (the loader's ``custom_fields``),
run on batches: ``DecoderStage`` reads the field's payloads through a memory manager."""

import numpy as np

from beton.memory_managers import OSCacheManager
from beton.pipeline.compiler import Compiler
from beton.pipeline.operation import Operation, _allocate
from beton.pipeline.state import State


class DecoderStage:
    """An FFCV-style Python decoder (an ``Operation`` of a custom field, ``custom_fields``) run on
    batches: ``stage(indices)`` decodes the samples ``indices`` of field ``field_name``.

    Parameters
    ----------
    decoder : Operation
        The decoder; its code is ``decode(indices, destination, metadata, storage_state)``.
    reader : beton.reader.Reader
        The file (with the custom handlers), for the field's metadata column.
    field_name : str
        The field decoded.
    memory_manager : MemoryManager, optional
        How payloads are read (``OSCacheManager`` by default).
    """

    def __init__(self, decoder: Operation, reader, field_name: str, memory_manager=None):
        self.decoder = decoder
        self.field_index = reader.field_names.index(field_name)
        self.metadata = reader.metadata[f"f{self.field_index}"]
        self.manager = memory_manager or OSCacheManager(reader)
        decoder.accept_field(reader.handlers[field_name])
        decoder.accept_globals(self.metadata, Compiler.compile(self.manager.compile_reader()))
        self.code = Compiler.compile(decoder.generate_code())
        self.context = None

    def __call__(self, indices):
        indices = np.asarray(indices, dtype=np.uint64)
        if self.context is None:
            self.context = self.manager.schedule_epoch([indices])
            self.context.__enter__()
        start = State(jit_mode=True, device="cpu", shape=None, dtype=np.dtype("u1"))
        _, alloc = self.decoder.declare_state_and_memory(start)
        dst = None if alloc is None else _allocate(alloc, len(indices))
        out = self.code(indices, dst, self.metadata, self.context.state)
        return dst if out is None else out
