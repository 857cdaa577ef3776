"""Fine-tuning tasks, one folder each, with the same steps under the same module names.

- `classification/`: GLUE (and any labelled text table in GLUE's layout).
- `tagging/`: CoNLL-2003 named entities (and any CoNLL-format files).
- `span_qa/`: SQuAD v1.1 and v2.0 extractive question answering.

In each, one module a step, and in each step one function of the same name in every task (the task's own
name for it, e.g. `tagging.read_conll`, is the same function):

1. `reading.read_examples`: files -> examples, file:line errors.
2. `features.encode_examples`: examples -> model inputs.
3. `batches.make_dataset` (and `make_packed_dataset`, `make_array_batches`): tf.data, and the NumPy twin.
4. `evaluation.evaluate`: the model's predictions scored by the official metric (the scorers are in
   `keras_bert_impl.metrics`).
5. `outputs.write_outputs`: result and prediction files.
6. `prediction.predict(model, features, ...)`: the model's prediction of every example of step 2's features,
   in order (raw text: the task model's own helpers).

and `run`, the fine-tuning story over one config dataclass. See docs/architecture.md.
"""
