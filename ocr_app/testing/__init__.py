"""Offline helpers for tests and benchmarks: tiny models built on the spot."""
