"""The SDK and the runner: ``report()``, ``Reporter``, ``tuneplane run -- CMD``.

Imports ``tuneplane.contract`` only, never the server or the store, so training images need
nothing else of the package.
"""
