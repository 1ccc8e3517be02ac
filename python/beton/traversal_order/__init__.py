"""FFCV's ``ffcv.traversal_order``: the order samples are visited in each epoch. A
``TraversalOrder`` subclass (``__init__(self, loader)``, ``sample_order(self, epoch)``) can be
given to the Loader as ``order``."""

from beton.traversal_order.base import TraversalOrder
from beton.traversal_order.quasi_random import QuasiRandom
from beton.traversal_order.random import Random
from beton.traversal_order.sequential import Sequential

__all__ = ["Sequential", "Random", "QuasiRandom", "TraversalOrder"]
