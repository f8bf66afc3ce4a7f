"""The package's version: in ``contract/`` so every room can name it without importing the
package root, which imports the client."""

from __future__ import annotations

__version__ = "0.1.0"
