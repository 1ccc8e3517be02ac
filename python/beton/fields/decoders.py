"""FFCV's decoders. The scalar, array and bytes decoders select the native decoders of their
field type; image decoders come with the image pipeline."""


class _Decoder:
    _beton_decoder = True

    def __repr__(self):
        return f"{type(self).__name__}()"


class IntDecoder(_Decoder):
    pass


class FloatDecoder(_Decoder):
    pass


class NDArrayDecoder(_Decoder):
    pass


class BytesDecoder(_Decoder):
    pass


__all__ = ["IntDecoder", "FloatDecoder", "NDArrayDecoder", "BytesDecoder"]
