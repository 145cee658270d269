"""Adapters for agent frameworks: one module per framework, one extra each.

Each module converts between the framework's messages and ours without loss and plugs
contextfold's strategies into the framework's own extension point, so its agent loop sends a
compacted, pair-safe context. Importing this package imports no framework; each module
imports its framework when it is used and says which extra to install when it is missing.
"""
