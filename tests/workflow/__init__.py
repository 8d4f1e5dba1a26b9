"""Workflows on the time-skipping test server."""
