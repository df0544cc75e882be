"""Ask/tell optimizers behind one interface (DESIGN §5), created by name through the registry."""

from optimizers.base import BaseOptimizer, Observation
from optimizers.registry import create_optimizer, optimizer_names

__all__ = ["BaseOptimizer", "Observation", "create_optimizer", "optimizer_names"]
