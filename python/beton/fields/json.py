"""FFCV's JSONField: any JSON-serialisable value per sample."""

import json

from beton.fields.base import Field


class JSONField(Field):
    type_name = "json"

    def encode(self, value):
        return json.dumps(value)
