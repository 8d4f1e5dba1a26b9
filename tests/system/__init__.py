"""The dev server, real HTTP hosts and subprocesses."""
