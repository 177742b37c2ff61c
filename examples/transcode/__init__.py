"""A Rill Flow executor that transcodes video for real: see README.md."""
