"""Runnable examples (see each folder's README.md)."""
