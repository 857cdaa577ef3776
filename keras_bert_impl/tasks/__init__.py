"""Fine-tuning tasks, one folder each, with the same steps under the same module names.

- `classification/`: GLUE (and any labelled text table in GLUE's layout).
- `tagging/`: CoNLL-2003 named entities (and any CoNLL-format files).
- `span_qa/`: SQuAD v1.1 and v2.0 extractive question answering.

In each: `reading` (files -> examples, file:line errors), `features`
(examples -> model inputs), `batches` (tf.data, and the NumPy twin),
`evaluation` (the official metric; the scorers are in `keras_bert_impl.metrics`),
`outputs` (result and prediction files), `prediction` (a split or raw text ->
predictions) and `run` (the fine-tuning story over one config dataclass).
See docs/architecture.md.
"""
