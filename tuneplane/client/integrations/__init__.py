"""Thin adapters from training frameworks onto the SDK (``tuneplane.integrations``)."""
