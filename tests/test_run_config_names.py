"""One name for one thing across the fine-tuning stories: the run configs and the recipes' flags name the
forward-pass batch `predict_batch_size` and the documented subsets `max_train_samples` / `max_eval_samples`
(Hugging Face's names); the earlier names still work, as flags and as config keywords."""

import dataclasses

import pytest

from keras_bert_impl.tasks.classification.run import ClassificationConfig
from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig
from keras_bert_impl.tasks.span_qa import reading as squad_reading
from keras_bert_impl.tasks.span_qa.run import SpanQaConfig
from keras_bert_impl.tasks.tagging.run import TaggingConfig
from repo_scripts import load_script

CONFIGS = (ClassificationConfig, TableClassificationConfig, TaggingConfig, SpanQaConfig)


def test_every_run_config_names_the_subsets_and_the_predict_batch_alike():
    for config_class in CONFIGS:
        names = {field.name for field in dataclasses.fields(config_class)}
        assert {"max_train_samples", "max_eval_samples", "batch_size", "sequence_length", "seed"} <= names, config_class
        assert not names & {"train_limit", "dev_limit", "eval_batch_size", "max_train_sentences",
                            "max_eval_sentences", "max_query_length"}, config_class
    for config_class in (ClassificationConfig, TaggingConfig, SpanQaConfig):  # the table run predicts in batch_size
        assert "predict_batch_size" in {field.name for field in dataclasses.fields(config_class)}


def test_old_config_keywords_build_the_new_fields():
    glue = ClassificationConfig("rte", "glue", "out", eval_batch_size=16, train_limit=100, dev_limit=50)
    assert (glue.predict_batch_size, glue.max_train_samples, glue.max_eval_samples) == (16, 100, 50)
    assert (glue.eval_batch_size, glue.train_limit, glue.dev_limit) == (16, 100, 50)  # read-only old names
    assert glue == ClassificationConfig("rte", "glue", "out", predict_batch_size=16, max_train_samples=100,
                                        max_eval_samples=50)
    assert dataclasses.replace(glue, max_train_samples=7).train_limit == 7
    conll = TaggingConfig("out", max_train_sentences=64, max_eval_sentences=24)
    assert (conll.max_train_samples, conll.max_eval_samples) == (64, 24)
    table = TableClassificationConfig("a.csv", "b.csv", "text", "label", "out", train_limit=10)
    assert table.max_train_samples == 10
    squad = SpanQaConfig("out", "dev.json", max_query_length=32)  # the preprocessor's name: max_question_length
    assert (squad.max_question_length, squad.max_query_length) == (32, 32)
    with pytest.raises(TypeError) as error:
        TaggingConfig("out", max_train_sentences=64, max_train_samples=32)
    assert str(error.value) == ("TaggingConfig() got `max_train_sentences=64` (the old name of `max_train_samples`) "
                                "and `max_train_samples=32`: give `max_train_samples` only.")


@pytest.mark.parametrize("recipe, required, old, new", [
    ("finetune_glue", ["--task", "rte", "--data_dir", "glue"],
     ["--eval_batch_size", "16", "--train_limit", "100", "--dev_limit", "50"],
     ["--predict_batch_size", "16", "--max_train_samples", "100", "--max_eval_samples", "50"]),
    ("finetune_conll", ["--data_dir", "conll", "--preset", "p"],
     ["--max_train_sentences", "64", "--max_eval_sentences", "24"],
     ["--max_train_samples", "64", "--max_eval_samples", "24"]),
    ("finetune_classifier", ["--train_file", "a.csv", "--validation_file", "b.csv", "--text_column", "t",
                             "--label_column", "y"],
     ["--train_limit", "10"], ["--max_train_samples", "10"]),
])
def test_old_flags_parse_to_the_same_config(recipe, required, old, new):
    module = load_script(f"recipes/{recipe}.py")
    parse = module.parse_args
    old_args, new_args = parse(required + old + ["--model_dir", "o"]), parse(required + new + ["--model_dir", "o"])
    assert old_args == new_args
    assert new_args.max_train_samples is not None


def test_squad_recipe_takes_the_subsets():
    module = load_script("recipes/finetune_squad.py")
    args = module.parse_args(["--train_file", "train.json", "--predict_file", "dev.json", "--preset", "p", "--model_dir", "o",
                              "--max_train_samples", "1000", "--max_eval_samples", "400", "--max_query_length", "32"])
    from command_line import config_from_args

    config = config_from_args(args, SpanQaConfig)
    assert (config.max_train_samples, config.max_eval_samples, config.predict_batch_size) == (1000, 400, 64)
    assert config.max_question_length == 32  # BERT's --max_query_length, the alias of --max_question_length
    base = ["--predict_file", "dev.json", "--init_checkpoint", "m.keras", "--epochs", "0", "--model_dir", "o"]
    assert module.parse_args(base + ["--max_query_length", "32"]) == module.parse_args(base + ["--max_question_length",
                                                                                             "32"])


def test_squad_gold_of_the_first_questions_keeps_the_file_layout(data_slices):
    gold = squad_reading.load_squad_json(data_slices / "squad" / "dev-v1.1.json.gz")
    examples, _ = squad_reading.read_squad_examples(gold)
    first = examples[:7]
    subset = squad_reading.select_questions(gold, {example.qas_id for example in first})
    kept, _ = squad_reading.read_squad_examples(subset)
    assert [example.qas_id for example in kept] == [example.qas_id for example in first]
    assert kept == first  # same contexts, questions and answers
    assert all(paragraph["qas"] for article in subset["data"] for paragraph in article["paragraphs"])
    assert subset["version"] == gold["version"]


def test_the_glue_recipe_knows_the_library_tasks():
    """The recipe keeps its own task names, to refuse a bad --task before TensorFlow is imported: the same list."""
    from keras_bert_impl.tasks.classification.reading import TASKS

    assert load_script("recipes/finetune_glue.py").TASKS == tuple(TASKS)
