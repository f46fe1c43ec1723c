"""Benchmarks of modelmon against the storage that hurts (not part of the installed package)."""
