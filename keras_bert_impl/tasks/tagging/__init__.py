"""CoNLL-2003 and other CoNLL-format tagging (named entities): the steps of `keras_bert_impl.tasks`.

The step functions are re-exported here (`from keras_bert_impl.tasks import
tagging; tagging.read_examples(path)`, the same function as `read_conll`); the fine-tuning story is
`keras_bert_impl.tasks.tagging.run` (`TaggingConfig`, `run`), imported on its own since it builds models.
"""

from keras_bert_impl.tasks.tagging.batches import (
    make_array_batches,
    make_dataset,
    make_packed_dataset,
    packed_features,
)
from keras_bert_impl.tasks.tagging.evaluation import (
    ConllEpochEvaluator,
    ConllEvaluation,
    ConllSplit,
    evaluate,
    evaluate_conll,
    load_conll_split,
)
from keras_bert_impl.tasks.tagging.features import (
    ConllFeatures,
    encode_examples,
    encode_sentences,
    tokenize_words,
    word_label_ids,
)
from keras_bert_impl.tasks.tagging.outputs import (
    write_conll_outputs,
    write_conll_predictions,
    write_outputs,
)
from keras_bert_impl.tasks.tagging.prediction import (
    predict,
    predict_token_label_ids,
    predict_word_tags,
)
from keras_bert_impl.tasks.tagging.reading import (
    DOCSTART,
    IGNORE_LABEL,
    SPLIT_FILE_NAMES,
    TAG_SCHEMES,
    ConllFormatError,
    ConllSentence,
    check_known_tags,
    convert_conll_file,
    convert_tags,
    find_split_files,
    iob1_to_iob2,
    iob2_to_iob1,
    iob2_to_iobes,
    iobes_to_iob2,
    label_vocabulary,
    num_documents,
    read_conll,
    read_examples,
    write_conll,
)
