"""Widgets of the monitor, one per module."""
