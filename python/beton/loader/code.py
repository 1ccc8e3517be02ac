"""What ``Loader.code`` shows: the pipelines as the loader compiled them, one block per output.

FFCV's ``Loader.code`` holds the functions it generated (numba stages and Python stages). beton
compiles a field's decoder, and for images the operations right after it, into one native stage
run per sample on worker threads; the rest runs in Python on whole batches. The description
says, per output: the decoder and its arguments, which operations run natively fused with it,
which run in Python, and the output's shape and dtype after each part. It is taken when the
pipelines are built (at the loader's creation, and again at each epoch with ``recompile=True``
or after ``generate_code()``), so an attribute changed since shows only once it is compiled.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from beton._native import InvalidArgumentError
from beton.fields.registry import KINDS
from beton.loader.decoder_stage import DecoderStage


class InvalidDecoderError(InvalidArgumentError, TypeError):
    """A decoder that cannot decode its field: one made for another type of field, or a
    ``SimpleRGBImageDecoder`` over images of several sizes. An ``InvalidArgumentError`` (so a
    ``BetonError`` and a ``ValueError``) and a ``TypeError``, which FFCV raises for the same
    misuse (``ffcv/fields/rgb_image.py``, ``SimpleRGBImageDecoder.declare_state_and_memory``)."""


# The start of the message of the native engine's error for a decoder its field cannot take
# (``loader/src/decode.rs``, ``loader/src/image/decoders``: ``InvalidArgument`` with
# ``what = "decoder for field '...'"``).
_DECODER_MESSAGE = "invalid decoder for field "


@contextlib.contextmanager
def ffcv_exception_types():
    """Re-raises the native engine's decoder errors as ``InvalidDecoderError`` (same message and
    attributes, also a ``TypeError``, as FFCV's); other errors pass unchanged."""
    try:
        yield
    except InvalidArgumentError as e:
        if isinstance(e, InvalidDecoderError) or not str(e).startswith(_DECODER_MESSAGE):
            raise
        error = InvalidDecoderError(*e.args)
        error.__dict__.update(e.__dict__)
        raise error.with_traceback(e.__traceback__) from None


def describe_op(op) -> str:
    """``Name(arg=value, ...)`` from an operation's public attributes (arrays by shape and dtype),
    leaving out what FFCV's ``Operation`` sets on it (``metadata``, ``memory_read``, ``field``)."""
    if inspect.isroutine(op) or inspect.isclass(op) or not hasattr(op, "__dict__"):
        return getattr(op, "__qualname__", None) or repr(op)
    parts = []
    for key, value in vars(op).items():
        if key.startswith("_") or key in ("metadata", "memory_read", "field"):
            continue
        if key == "flat" and value is False:  # a scalar decoder's default (FFCV's (B, 1))
            continue
        if isinstance(value, np.ndarray) and value.size > 4:
            text = f"<array {value.shape} {value.dtype}>"
        elif isinstance(value, np.ndarray):
            text = repr(value.tolist())
        elif isinstance(value, (type, np.dtype)):
            text = getattr(value, "__name__", None) or str(value)
        else:
            text = repr(value)
            if len(text) > 60:
                text = f"<{type(value).__name__}>"
        parts.append(f"{key}={text}")
    return f"{type(op).__name__}({', '.join(parts)})"


def _state_after(op, shape, dtype) -> Optional[Tuple[Optional[tuple], Any]]:
    """``(shape, dtype)`` an FFCV operation declares for its output, or ``None`` when it does not
    say (a plain callable, a stage that only knows at run time)."""
    from beton.pipeline.state import State

    declare = getattr(op, "declare_state_and_memory", None)
    if declare is None or shape is None:
        return None
    try:
        state, _ = declare(State(jit_mode=type(dtype).__module__ != "torch", device="cpu", shape=tuple(shape),
                                 dtype=dtype))
    except Exception:
        return None
    return (None if state.shape is None else tuple(state.shape)), state.dtype


def _shape_text(shape, dtype) -> str:
    if shape is None:
        return "shape and dtype set at run time"
    return f"({', '.join(['B', *map(str, shape)])}{',' if not shape else ''}) {dtype}"


class PipelineCode:
    """The description of a loader's compiled pipelines (``str()`` renders it). Made by
    ``snapshot``; the output shapes and dtypes are found when first rendered, by running the
    native stage on one sample (nothing else runs: Python stages only declare theirs)."""

    def __init__(self, header: str, blocks: List[dict], probe):
        self.header, self.blocks, self._probe = header, blocks, probe
        self._text: Optional[str] = None

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = self._text = self._render()
        return text

    __repr__ = __str__

    def _render(self) -> str:
        shapes, why = self._probe()
        lines = [self.header]
        for block in self.blocks:
            lines.append(f"{block['output']}: {block['source']}")
            shape, dtype = None, None
            if block["native_stage"]:
                lines.append(f"    decoder  {block['decoder']}  [native, per sample, on the worker threads]")
                for text in block["native"]:
                    lines.append(f"    native   {text}  [fused with the decoder]")
                shape, dtype = shapes.get(block["output"], (None, None))
                if block.get("ffcv_scalar") and shape == ():
                    shape = (1,)  # FFCV's (B, 1): the loader views the native (B,) column so
                lines.append(f"    -> {_shape_text(shape, dtype) if shape is not None else 'unknown (' + why + ')'}")
            else:
                lines.append(f"    decoder  {block['decoder']}  [Python, per batch]")
                shape, dtype = block["python_output"]
                lines.append(f"    -> {_shape_text(shape, dtype)}")
            for op, text in block["python"]:
                lines.append(f"    python   {text}  [per batch]")
                after = _state_after(op, shape, dtype)
                shape, dtype = after if after is not None else (None, None)
                lines.append(f"    -> {_shape_text(shape, dtype)}")
        return "\n".join(lines)


def snapshot(loader, native: Dict[str, Any]) -> PipelineCode:
    """The description of ``loader``'s pipelines as just built; ``native`` is what ``_build``
    handed the native engine (output name to its native decoder or image pipeline). Never
    raises: a pipeline it cannot describe is said to be so (the loader works regardless)."""
    try:
        return _snapshot(loader, native)
    except Exception as e:  # a description must not stop a loader from being made
        return PipelineCode(f"Loader({loader.fname!r}): the pipelines could not be described "
                            f"({type(e).__name__}: {e})", [], lambda: ({}, ""))


def _snapshot(loader, native: Dict[str, Any]) -> PipelineCode:
    from beton.pipeline import PipelineSpec
    from beton.pipeline.operation import BatchStage

    kinds = {name: kind for name, kind, _ in loader.dataset._native.fields()}
    blocks = []
    for name in loader.fields:
        stages = loader.stages.get(name, [])
        python_ops = [s.op if isinstance(s, BatchStage) else s for s in stages]
        spec = loader._pipelines.get(name)
        python_decoder = loader._python_decoders.get(name)
        if isinstance(spec, PipelineSpec):
            source, ops = f"a view of field '{spec.source}' ({kinds[spec.source]})", (
                [spec.decoder] if spec.decoder is not None else []) + list(spec.transforms)
        else:
            source = f"field '{name}' ({kinds[name]})" if name in kinds else "the batch's sample ids (beton)"
            ops = list(spec) if isinstance(spec, (list, tuple)) else []
        if python_decoder is not None:
            op = python_decoder.decoder if isinstance(python_decoder, DecoderStage) else None
            blocks.append({"output": name, "source": source, "native_stage": False,
                           "python_output": _decoded(op),
                           "decoder": describe_op(op) if op is not None else "the sample ids",
                           "native": [], "python": [(op, describe_op(op)) for op in python_ops]})
            continue
        if ops and getattr(ops[0], "_beton_decoder", False):
            decoder, rest = describe_op(ops[0]), ops[1:]
        else:
            decoder, rest = f"{_default_decoder_name(kinds.get(name))}() (the field's default)", ops
        fused = [describe_op(op) for op in rest if not any(op is p for p in python_ops)]
        blocks.append({"output": name, "source": source, "native_stage": True, "decoder": decoder,
                       "native": fused, "python": [(op, describe_op(op)) for op in python_ops],
                       "ffcv_scalar": name in getattr(loader, "_column_shape", {})})
    epoch = loader._native.next_epoch_number
    header = (f"Loader({loader.fname!r}, batch_size={loader.batch_size}): pipelines compiled for epoch {epoch}"
              f"{' (recompiled at every epoch)' if loader.recompile else ''}")
    views = {n for n, spec in loader._pipelines.items() if isinstance(spec, PipelineSpec)}
    probe_args = (loader.dataset._native, dict(native), [n for n in native if n not in views], _first_row(loader),
                  epoch, loader.seed, dict(loader.fill_nulls) or None)
    return PipelineCode(header, blocks, lambda: _probe_shapes(*probe_args))


def _decoded(decoder) -> Tuple[Optional[tuple], Any]:
    """``(shape, dtype)`` a Python decoder declares (as ``DecoderStage`` asks it); the sample
    ids' for ``None``."""
    from beton.pipeline.state import State

    if decoder is None:
        return (), np.dtype("uint64")
    try:
        state, _ = decoder.declare_state_and_memory(State(jit_mode=True, device="cpu", shape=None,
                                                          dtype=np.dtype("u1")))
        return (None if state.shape is None else tuple(state.shape)), state.dtype
    except Exception:
        return None, None


def _default_decoder_name(kind) -> str:
    registered = KINDS.get(kind)
    return "a decoder" if registered is None else registered.decoder.__name__


def _first_row(loader) -> Optional[int]:
    """A row the loader reads (its first), on which the native stage's output is probed."""
    if loader._index_list is not None:
        return loader._index_list[0] if loader._index_list else None
    if loader._index_set is not None:
        return loader._index_set[0] if len(loader._index_set) else None
    if loader._indices is not None:
        return int(loader._indices[0]) if len(loader._indices) else None
    return 0 if len(loader.dataset) else None


def _probe_shapes(dataset, native, fields, row, epoch, seed, fill_nulls) -> Tuple[Dict[str, tuple], str]:
    """``{output: (per-sample shape, dtype)}`` of the native stage, from decoding sample ``row``
    with the same native pipelines (``fields``: those that are not views) in a loader of its
    own: the loader's epochs are untouched."""
    from beton import _native
    from beton._native import IndexSet

    if row is None:
        return {}, "no samples"
    try:
        with ffcv_exception_types():
            probe = _native.Loader(dataset, 1, num_workers=1, order=_native.Order.Sequential, seed=seed,
                                   drop_last=False, batches_ahead=1, indices=IndexSet([row]),
                                   fields=fields, pipelines=native, fill_nulls=fill_nulls)
            if epoch:
                probe.set_epoch(epoch)
            epoch_iter = probe.epoch()
            try:
                batch = next(epoch_iter)
                out = {}
                for n in batch.names():
                    column = np.asarray(batch.column(n))
                    out[n] = (tuple(column.shape[1:]), column.dtype)
            finally:
                epoch_iter.close()
    except Exception as e:
        return {}, f"{type(e).__name__}: {e}"
    return out, ""
