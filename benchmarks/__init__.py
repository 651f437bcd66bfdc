"""Load benchmarks against the real processes (not tests)."""
