"""The base of field types: what the native writer needs to know and how values convert."""

from typing import Any, Dict, Optional, Tuple

import numpy as np


class Field:
    """A field type. ``spec`` names it for the native writer; ``encode`` turns a Python value
    into what the writer takes (ints, floats, bytes, str, or image sources)."""

    type_name = ""

    def options(self) -> Optional[Dict[str, Any]]:
        return None

    def spec(self, name: str) -> Tuple[str, str, Optional[Dict[str, Any]]]:
        return (name, self.type_name, self.options())

    def encode(self, value: Any) -> Any:
        return value


# FFCV's type of a field descriptor's 1024-byte argument blob.
ARG_TYPE = np.dtype([("", "<u1", 1024)])
