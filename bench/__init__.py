"""The benchmarks and soaks: each a script (`python bench/NAME.py`) that prints its figures as
ratios against a baseline run side by side in the same process; `stats` is what they share."""
