"""Domain hosts: the HTTP side that scheduled commands are delivered to."""
