"""FFCV's ``ffcv.memory_managers.process_cache``: pages read into the process's own memory
(beton's ``os_cache=False``)."""

from beton.memory_managers.process_cache.context import ProcessCacheContext
from beton.memory_managers.process_cache.manager import ProcessCacheManager

__all__ = ["ProcessCacheContext", "ProcessCacheManager"]
