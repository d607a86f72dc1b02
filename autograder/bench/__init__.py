"""Benchmarks, each ``python -m autograder.bench.<name>``: timings live here, never in a test."""
