"""Evaluation outcome arithmetic as pure functions: the store feeds rows, the server shows
results. Nothing here invents a percentage: where a number cannot be honest, it is a reason.
"""
