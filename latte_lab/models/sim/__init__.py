"""Internals of the simulated model: source splicing, task skill, reply text and the role policy.

The public entry point is :class:`latte_lab.models.simulated.SimulatedModel`.
"""
