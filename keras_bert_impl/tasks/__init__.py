"""Task-level helpers: reading users' own data for the task models."""
