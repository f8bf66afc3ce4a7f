"""Launching jobs: recipes (declared job templates), the readiness checks, and one adapter per
job engine. tuneplane submits to engines people run and watches what they report; it never
schedules. Imports ``contract`` only; ``store`` records submissions, ``server`` exposes them.
"""
