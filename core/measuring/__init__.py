"""Measuring: the A/B over runs, the storage's ceilings, the one search that recommends (its
candidates: modelmon's strategies, other loaders, the user's loader), ranks."""
