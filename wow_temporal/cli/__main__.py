"""`python -m wow_temporal.cli`: the console script's entry point."""

from wow_temporal.cli import main

if __name__ == "__main__":
    main()
