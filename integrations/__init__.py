"""Adapters that put foldwise's optimizers inside other tools' search loops.

``foldwise.integrations.tune`` offers them to Ray Tune as a ``Searcher``. These modules import
``optimizers`` and the tool they serve, so they need ``pip install 'foldwise[server]'``; nothing
else in ``foldwise`` imports them, and ``import foldwise`` stays as light as the SDK.
"""
