"""Adapters for agent frameworks: each converts the framework's messages to ours and back.

One module per framework, each behind its own extra, imported only when asked for
(``from contextfold.integrations import pydantic_ai``); importing this package imports no
framework.
"""
