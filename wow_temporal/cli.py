"""The `wow-temporal` command line."""

import typer

app = typer.Typer(no_args_is_help=True, help=__doc__)


def main() -> None:
    """Entry point of the console script."""
    app()
