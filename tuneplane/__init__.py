"""tuneplane: telemetry for fine-tuning and RL training runs."""

__version__ = "0.1.0"
