"""Wire formats, identifiers, limits and the error tree: pure Python, no I/O."""
