"""The benchmarks' smoke runs and the soaks (in the system tier)."""
