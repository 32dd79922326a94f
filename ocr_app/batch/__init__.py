"""Batch folder runs: resumable, concurrent, nothing lost (see `runner` and `state`)."""
