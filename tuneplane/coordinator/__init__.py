"""The fixed-checkpoint evaluation coordinator (``tuneplane eval run``): runs an explicit
cohort of Harbor trials and writes the same snapshot as ``tuneplane import harbor``."""
