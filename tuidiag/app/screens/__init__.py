"""Screens of the monitor, one per module."""
