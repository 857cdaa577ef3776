"""Training plumbing: optimizers and LR schedules, distribution strategies, callbacks, checkpointing."""
