"""Readers of other tools' files: pure functions over files producing contract objects.

No HTTP and no SQL here: the CLI hands what these functions build to the client for upload.
"""
