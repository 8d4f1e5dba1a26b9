"""The benchmarks and soaks: each a module (`python -m bench.NAME [--quick] [--json]`) that prints
its figures as ratios against a baseline run side by side in the same run; `harness` is
what they share."""
