"""The domains the tests run, importable by worker processes (`--app tests.apps.jobs_app:bulk`)."""
