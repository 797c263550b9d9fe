"""Helpers shared by the example scripts."""
