"""Checkpoint converters: Hugging Face, original Google TF1, keras-hub, own presets; export."""
