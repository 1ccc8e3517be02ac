"""FFCV's IntField and FloatField, and beton's BoolField."""

from beton.fields.base import Field


class IntField(Field):
    """A 64-bit signed integer per sample."""

    type_name = "int"

    def encode(self, value):
        return int(value)


class FloatField(Field):
    """A 64-bit float per sample."""

    type_name = "float"

    def encode(self, value):
        return float(value)


class BoolField(Field):
    """A bool per sample (beton extension; FFCV sees an opaque custom field)."""

    type_name = "bool"

    def encode(self, value):
        return bool(value)


from beton.fields.decoders import BasicDecoder, FloatDecoder, IntDecoder  # noqa: E402,F401 (FFCV's path)
