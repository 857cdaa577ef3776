"""Text processing (TensorFlow + tensorflow-text): WordPiece tokenizer, vocabulary building, segment packing."""
