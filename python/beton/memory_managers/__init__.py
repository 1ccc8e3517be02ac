"""FFCV's ``ffcv.memory_managers``: how a loader reads the file. beton's loader does its reading
natively, through the OS page cache (``os_cache=True``, FFCV's ``OSCacheManager``) or its own
process cache (``os_cache=False``, FFCV's ``ProcessCacheManager``); these classes are FFCV's Python
API over the same file: the sample/page maps (``page_to_samples`` for ``QuasiRandom``) and
``compile_reader`` for FFCV-style Python decoders."""

from beton.memory_managers.base import MemoryContext, MemoryManager
from beton.memory_managers.os_cache import OSCacheManager
from beton.memory_managers.process_cache import ProcessCacheManager

__all__ = ["OSCacheManager", "ProcessCacheManager", "MemoryManager", "MemoryContext"]
