"""A task module that ends the process that imports it, successfully and without a word."""

from __future__ import annotations

import sys

sys.exit(0)
