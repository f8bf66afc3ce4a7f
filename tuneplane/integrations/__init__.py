"""Framework integrations: ``tuneplane.integrations.transformers.TuneplaneCallback``."""
