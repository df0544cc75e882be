"""Ask/tell optimizers behind one interface (DESIGN §5), created by name through the registry."""

from foldwise.optimizers.base import BaseOptimizer, Observation
from foldwise.optimizers.registry import create_optimizer, optimizer_names

__all__ = ["BaseOptimizer", "Observation", "create_optimizer", "optimizer_names"]
