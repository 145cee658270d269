"""Adapters for agent frameworks, one module (and one extra) per framework.

Each module converts the framework's messages to :class:`~contextfold.messages.Message` and
back, and plugs contextfold's strategies into the framework's own extension point. Importing
this package imports no framework; importing a module without its extra raises
:class:`~contextfold.errors.MissingExtraError` naming the extra to install.
"""
