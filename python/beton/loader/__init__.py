"""FFCV's ``ffcv.loader`` package: ``Loader`` and ``OrderOption`` (defined in
``beton.loader.loader``, FFCV's module path)."""

from beton.loader.loader import Loader, OrderOption

__all__ = ["Loader", "OrderOption"]
