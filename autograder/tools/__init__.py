"""Learner tools used by the notebooks: plots, widgets and small helpers."""
