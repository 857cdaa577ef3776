"""Classification tasks: reading labelled text tables."""
