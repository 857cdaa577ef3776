"""SQuAD v1.1 / v2.0 extractive question answering: the steps of `keras_bert_impl.tasks`.

The step functions are re-exported here (`from keras_bert_impl.tasks import
span_qa; span_qa.read_examples(path)`, the same function as `read_squad_examples`); the fine-tuning story is
`keras_bert_impl.tasks.span_qa.run` (`SpanQaConfig`, `run`), imported on its own since it builds models.
"""

from keras_bert_impl.tasks.span_qa.batches import (
    PackedPredictionBatches,
    PredictionBatches,
    make_array_batches,
    make_dataset,
    make_packed_dataset,
    packed_training_rows,
)
from keras_bert_impl.tasks.span_qa.evaluation import (
    SquadResult,
    evaluate,
    predict_squad,
    tune_null_threshold,
)
from keras_bert_impl.tasks.span_qa.features import (
    SquadFeatures,
    TokenizedText,
    char_span_to_token_span,
    convert_examples_to_features,
    encode_examples,
    tokenize_texts,
)
from keras_bert_impl.tasks.span_qa.outputs import (
    write_outputs,
    write_squad_outputs,
)
from keras_bert_impl.tasks.span_qa.prediction import (
    SquadPredictions,
    answer_question,
    answer_questions,
    apply_null_threshold,
    postprocess_predictions,
    predict,
    predict_logits,
)
from keras_bert_impl.tasks.span_qa.reading import (
    ReadStats,
    SquadExample,
    SquadFormatError,
    load_squad_json,
    read_examples,
    read_squad_examples,
    select_questions,
    split_articles,
    squad_version,
)
