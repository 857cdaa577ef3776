"""A run that predicts only (`--epochs 0`) never replaces the scores a training run left beside its `model.keras`.

Every story's `check_flags` refuses it in one line, before any file is read or model loaded: the training run's
`dev_results.json` (GLUE, your tables, CoNLL's `dev_results.json` / `test_results.json`) or `eval.json` (SQuAD)
holds its best epoch, validation history and timings, which a prediction's scores would replace. Predictions alone
(a table's `test_predictions.tsv`, CoNLL's `--predict_text`) may go into the training run's directory, as the
quickstart shows. The recipe's one line is checked in tests/test_finetune_classifier_recipe.py.
"""

import pytest

from keras_bert_impl.tasks.classification import run as glue_run
from keras_bert_impl.tasks.classification import table_run
from keras_bert_impl.tasks.span_qa import run as span_qa_run
from keras_bert_impl.tasks.tagging import run as tagging_run


def refusal(model_dir, *names):
    return (f"--model_dir {model_dir} holds the model.keras of a training run and its scores ({', '.join(names)}): "
            "--epochs 0 would replace them. Give another --model_dir for this run's outputs (--init_checkpoint reads "
            "the model from wherever it is)")


@pytest.fixture
def trained_run(tmp_path):
    """A training run's directory: its model.keras and the score files of every story."""
    run = tmp_path / "run"
    run.mkdir()
    for name in ("model.keras", "dev_results.json", "test_results.json", "eval.json"):
        (run / name).write_text("{}")
    return run


def conll_files(tmp_path):
    """A CoNLL data_dir with train, dev and test files (their content is not read by `check_flags`)."""
    data = tmp_path / "conll"
    data.mkdir()
    for name in ("train.txt", "dev.txt", "test.txt"):
        (data / name).write_text("EU B-ORG\n")
    return data


def test_glue_refuses_to_replace_the_training_runs_dev_results(trained_run):
    config = glue_run.ClassificationConfig(task="rte", data_dir="glue", model_dir=str(trained_run), epochs=0,
                                           init_checkpoint=str(trained_run / "model.keras"))
    with pytest.raises(ValueError) as error:
        glue_run.check_flags(config)
    assert str(error.value) == refusal(trained_run, "dev_results.json")


def test_table_refuses_scores_but_labels_new_rows_beside_the_model(trained_run):
    model = str(trained_run / "model.keras")
    scoring = table_run.TableClassificationConfig(None, "dev.csv", "text", "label", str(trained_run), preset=model,
                                                  epochs=0)
    with pytest.raises(ValueError) as error:
        table_run.check_flags(scoring)
    assert str(error.value) == refusal(trained_run, "dev_results.json")
    # The quickstart's `--epochs 0 --test_file new.csv --model_dir <the training run>`: predictions only.
    table_run.check_flags(table_run.TableClassificationConfig(None, None, "text", None, str(trained_run),
                                                              test_file="new.csv", preset=model, epochs=0))


def test_span_qa_refuses_to_replace_the_training_runs_eval_json(trained_run):
    config = span_qa_run.SpanQaConfig(model_dir=str(trained_run), predict_file="dev-v1.1.json", epochs=0,
                                      init_checkpoint=str(trained_run / "model.keras"))
    with pytest.raises(ValueError) as error:
        span_qa_run.check_flags(config)
    assert str(error.value) == refusal(trained_run, "eval.json")


def test_tagging_refuses_the_split_scores_but_tags_raw_text_beside_the_model(trained_run, tmp_path):
    model = str(trained_run / "model.keras")
    config = tagging_run.TaggingConfig(model_dir=str(trained_run), data_dir=str(conll_files(tmp_path)), epochs=0,
                                       init_checkpoint=model)
    with pytest.raises(ValueError) as error:
        tagging_run.check_flags(config)
    assert str(error.value) == refusal(trained_run, "dev_results.json", "test_results.json")
    # The recipe's `--predict_text` with no data files writes no score file.
    tagging_run.check_flags(tagging_run.TaggingConfig(model_dir=str(trained_run), epochs=0, init_checkpoint=model,
                                                      predict_text=["EU rejects German call"]))


def test_another_directory_or_training_further_is_not_refused(trained_run, tmp_path):
    model = str(trained_run / "model.keras")
    glue_run.check_flags(glue_run.ClassificationConfig(task="rte", data_dir="glue", model_dir=str(tmp_path / "new"),
                                                       epochs=0, init_checkpoint=model))
    # Training (further) into the directory resumes or replaces the whole run, model included: its own business.
    span_qa_run.check_flags(span_qa_run.SpanQaConfig(model_dir=str(trained_run), predict_file="dev-v1.1.json",
                                                     train_file="train-v1.1.json", epochs=1, init_checkpoint=model))
    # Score files without a model.keras are not a training run's record (a run that predicted only wrote them).
    (trained_run / "model.keras").unlink()
    glue_run.check_flags(glue_run.ClassificationConfig(task="rte", data_dir="glue", model_dir=str(trained_run),
                                                       epochs=0, init_checkpoint=model))
