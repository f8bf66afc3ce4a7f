"""The HTTP server: routes parse, authorize and call the store."""
