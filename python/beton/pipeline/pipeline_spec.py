"""FFCV's ``PipelineSpec``: one output of the loader, from a field through a decoder and
transforms; ``pipelines={'view2': PipelineSpec('image', decoder, [...])}`` makes a second view of
a field."""

from typing import List, Optional

from beton.pipeline.operation import Operation  # noqa: F401 (FFCV's module binds it)
from beton.transforms.module import ModuleWrapper  # noqa: F401 (FFCV's module binds it)
from beton.transforms.ops import ToTensor  # noqa: F401 (FFCV's module binds it)


class PipelineSpec:
    """A pipeline from ``source`` (a field name) through ``decoder`` and ``transforms``.

    Parameters
    ----------
    source : str
        The field read.
    decoder : Operation, optional
        The decoder (the field's default one when ``None``).
    transforms : list of Operation, optional
        The operations after the decoder.
    """

    def __init__(self, source, decoder=None, transforms: Optional[List] = None):
        self.source = source
        self.decoder = decoder
        self.transforms = [] if transforms is None else transforms
        self.default_pipeline = decoder is None and not self.transforms and isinstance(source, str)

    def __repr__(self):
        return repr((self.source, self.decoder, self.transforms))

    def __str__(self):
        return self.__repr__()

    def accept_decoder(self, Decoder, output_name):
        """FFCV's: takes the decoder from the front of ``transforms`` when it is a ``Decoder``, else
        makes a default one; a default pipeline gets ``ToTensor``; torch modules are wrapped."""
        if not isinstance(self.source, str) and self.decoder is not None:
            raise ValueError("Source can't be a node and also have a decoder")
        if Decoder is not None:
            if self.transforms and isinstance(self.transforms[0], Decoder):
                self.decoder = self.transforms.pop(0)
            elif self.decoder is None:
                try:
                    self.decoder = Decoder()
                except Exception:
                    raise ValueError(f"Impossible to use default decoder for {output_name}, "
                                     "make sure you specify one in your pipeline.") from None
        from beton.transforms.module import ModuleWrapper
        from beton.transforms.ops import ToTensor

        if self.default_pipeline:
            self.transforms.append(ToTensor())
        for i, op in enumerate(self.transforms):
            if type(op).__module__.startswith("torch") or _is_module(op):
                self.transforms[i] = ModuleWrapper(op)


def _is_module(op):
    try:
        import torch
    except ImportError:
        return False
    return isinstance(op, torch.nn.Module)
