"""The Hugging Face ``Trainer`` callback (TRL's trainers too): see
:class:`tuneplane.client.integrations.transformers.TuneplaneCallback`."""

from tuneplane.client.integrations.transformers import TuneplaneCallback

__all__ = ["TuneplaneCallback"]
