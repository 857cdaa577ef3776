"""GLUE and other sentence(-pair) classification: the steps of `keras_bert_impl.tasks`.

The step functions are re-exported here (`from keras_bert_impl.tasks import classification;
classification.read_examples(task, data_dir, split)`, the same function as `read_split`); the fine-tuning
story is `keras_bert_impl.tasks.classification.run` (`ClassificationConfig`, `run`),
imported on its own since it builds models. Labelled tables in CSV, TSV or
JSON Lines (your own data) are read by `table_files`, and fine-tuned by the
story of `recipes/finetune_classifier.py`, `table_run`.
"""

from keras_bert_impl.tasks.classification.batches import make_array_batches, make_dataset, make_packed_dataset
from keras_bert_impl.tasks.classification.evaluation import (
    classification_scores,
    evaluate,
    evaluate_metric_names,
    evaluate_splits,
    glue_score,
    regression_scores,
    score_outputs,
)
from keras_bert_impl.tasks.classification.features import encode_examples, encode_texts, example_lengths, split_texts
from keras_bert_impl.tasks.classification.outputs import (
    SUBMISSION_HEADER,
    format_predictions,
    save_model_atomically,
    write_dev_results,
    write_outputs,
    write_submission,
)
from keras_bert_impl.tasks.classification.prediction import predict, predict_split
from keras_bert_impl.tasks.classification.reading import (
    STSB_SCORE_RANGE,
    TASKS,
    GlueFormatError,
    GlueSplit,
    GlueTask,
    get_task,
    read_examples,
    read_split,
    read_tsv_lines,
    resolve_task_dir,
    split_path,
    task_names,
)
