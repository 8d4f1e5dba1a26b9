"""Runnable example domains (the spec's e-shop)."""
