"""Pure code and in-process fakes: no server, no subprocess."""
