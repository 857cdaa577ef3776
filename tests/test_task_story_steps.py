"""The story steps of `keras_bert_impl/tasks/` (docs/architecture.md, "Every story"): `read_inputs` reads and checks
every input file before `build_model` runs, so a bad file is one error in seconds and never after training; a
fine-tuned tagger's label names are read from its `.keras` file without building the model."""

import gzip
import json
import shutil

import pytest


def _refuse_models(monkeypatch, module):
    def build_model(*args, **kwargs):
        raise AssertionError("build_model ran before every input file was read and checked")

    monkeypatch.setattr(module, "build_model", build_model)


def _conll_lines(path, sentences):
    """The first `sentences` sentences of a real CoNLL-2003 file, as lines."""
    lines, count = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        lines.append(line)
        if not line.strip() and len(lines) > 1 and lines[-2].strip() and not lines[-2].startswith("-DOCSTART-"):
            count += 1
            if count == sentences:
                break
    return lines


def test_glue_a_missing_dev_file_fails_before_any_model(data_slices, tmp_path, monkeypatch):
    from keras_bert_impl.tasks.classification import run as glue

    (tmp_path / "STS-B").mkdir()
    shutil.copy(data_slices / "glue" / "STS-B" / "train.tsv", tmp_path / "STS-B" / "train.tsv")
    _refuse_models(monkeypatch, glue)
    with pytest.raises(FileNotFoundError, match=r"STS-B[/\\]dev.tsv"):
        glue.run(glue.ClassificationConfig(task="stsb", data_dir=str(tmp_path), model_dir=str(tmp_path / "model")))


def test_squad_a_v2_training_file_under_version_1_1_fails_before_any_model(data_slices, tmp_path, monkeypatch):
    from keras_bert_impl.tasks.span_qa import run as squad

    dev = data_slices / "squad" / "dev-v1.1.json.gz"
    with gzip.open(dev, "rt", encoding="utf-8") as f:
        dataset = json.load(f)
    train = tmp_path / "train-v2.0.json"
    train.write_text(json.dumps(dict(dataset, version="v2.0")), encoding="utf-8")
    _refuse_models(monkeypatch, squad)
    with pytest.raises(ValueError, match=r"train-v2.0.json holds SQuAD v2.0 content .* pass --version 2.0"):
        squad.run(squad.SpanQaConfig(model_dir=str(tmp_path / "model"), predict_file=str(dev), train_file=str(train),
                                     preset="bert_tiny_en_uncased"))


def test_table_an_unknown_validation_label_fails_before_any_model(data_slices, tmp_path, monkeypatch):
    from keras_bert_impl.tasks.classification import table_run
    from keras_bert_impl.tasks.classification.reading import read_split
    from keras_bert_impl.tasks.classification.table_files import UnknownLabelError

    stsb = read_split("stsb", data_slices / "glue", "train")
    rows = [{"text": a, "label": "paraphrase" if score >= 4 else "other"} for a, score in zip(stsb.text_a, stsb.labels)]
    train, validation = tmp_path / "train.jsonl", tmp_path / "dev.jsonl"
    train.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    rows[3]["label"] = "unrelated"  # not a label of the training file
    validation.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    _refuse_models(monkeypatch, table_run)
    with pytest.raises(UnknownLabelError, match=r"dev.jsonl.*line 4.*'unrelated'"):
        table_run.run(table_run.TableClassificationConfig(str(train), str(validation), "text", "label",
                                                          str(tmp_path / "model")))


def test_table_scores_without_regression_are_one_line_before_any_model(data_slices, tmp_path, monkeypatch):
    """STS-B's scores ('3.800') without --regression: before, a classifier of one class per distinct score, or (where
    a dev score was not among the training ones) 'label ... is not among the training labels' without the hint."""
    from keras_bert_impl.tasks.classification import table_run
    from keras_bert_impl.tasks.classification.reading import read_split

    stsb = read_split("stsb", data_slices / "glue", "train")
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"text": a, "score": f"{score:.3f}"}) + "\n"
                             for a, score in zip(stsb.text_a, stsb.labels)), encoding="utf-8")
    _refuse_models(monkeypatch, table_run)
    with pytest.raises(ValueError) as error:
        table_run.run(table_run.TableClassificationConfig(str(train), str(train), "text", "score",
                                                          str(tmp_path / "model")))
    message = str(error.value)
    assert message.startswith(f"{train}: column 'score' holds numbers with decimals (e.g. '")
    assert message.endswith("read as as many classes: add --regression for scores")


def _tagger(label_names):
    from keras_bert_impl import BertBackbone, BertTokenClassifier

    backbone = BertBackbone(vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=16)
    return BertTokenClassifier(backbone, 3, label_names=label_names)


def test_a_fine_tuned_taggers_label_names_come_from_its_file(tmp_path):
    from keras_bert_impl.tasks.tagging.run import fine_tuned_label_names

    path = tmp_path / "model.keras"
    _tagger(["O", "B-LOC", "I-LOC"]).save(path)
    assert fine_tuned_label_names(str(path)) == ["O", "B-LOC", "I-LOC"]

    older = tmp_path / "older"  # a model saved before it kept its label names: labels.json beside it
    older.mkdir()
    _tagger(None).save(older / "model.keras")
    with pytest.raises(FileNotFoundError, match=r"the model has no label names and .*labels.json does not exist"):
        fine_tuned_label_names(str(older / "model.keras"))
    (older / "labels.json").write_text(json.dumps(["O", "B-PER", "I-PER"]), encoding="utf-8")
    assert fine_tuned_label_names(str(older / "model.keras")) == ["O", "B-PER", "I-PER"]

    with pytest.raises(FileNotFoundError, match=r"--init_checkpoint .*missing.keras: no such file"):
        fine_tuned_label_names(str(tmp_path / "missing.keras"))
    text = tmp_path / "notes.keras"
    text.write_text("not a model\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--init_checkpoint .*notes.keras: not a Keras model file"):
        fine_tuned_label_names(str(text))
    cut = tmp_path / "cut_short.keras"  # a copy or download stopped half-way
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ValueError) as error:
        fine_tuned_label_names(str(cut))
    assert str(error.value) == (f"--init_checkpoint {cut}: a .keras zip cut short or damaged "
                                f"({cut.stat().st_size:,} bytes; its table of contents, at the end, is missing): "
                                "copy or download it again")


def test_tagging_a_tag_unknown_to_the_fine_tuned_model_fails_before_it_is_loaded(shared_data, tmp_path, monkeypatch):
    from keras_bert_impl.tasks.tagging import run as tagging
    from keras_bert_impl.tasks.tagging.reading import ConllFormatError

    model = tmp_path / "model.keras"
    _tagger(["O", "B-LOC", "I-LOC"]).save(model)  # CoNLL-2003's dev file has PER, ORG and MISC tags too
    dev = tmp_path / "eng.testa"
    dev.write_text("\n".join(_conll_lines(shared_data / "conll2003" / "eng.testa", 5)) + "\n", encoding="utf-8")
    _refuse_models(monkeypatch, tagging)
    with pytest.raises(ConllFormatError, match=r"eng.testa, line 5, column 4: tag 'I-ORG' \(type 'ORG'\) is not in "
                                               r"the fine-tuned model's labels, whose entity types are \['LOC'\]"):
        tagging.run(tagging.TaggingConfig(model_dir=str(tmp_path / "out"), init_checkpoint=str(model),
                                          validation_file=str(dev), epochs=0, tokenizer="bert_tiny_en_uncased"))


@pytest.mark.parametrize("story", ["span_qa", "tagging"])
def test_a_story_starts_from_one_backbone(story, tmp_path):
    """`--preset` and `--init_checkpoint` are exclusive on the command line; in Python, both (one was silently
    ignored) or neither (the tokenizer failed on `None`) is one line before any file is read."""
    import importlib

    run = importlib.import_module(f"keras_bert_impl.tasks.{story}.run")
    make = {"span_qa": lambda **k: run.SpanQaConfig(model_dir=str(tmp_path), predict_file="dev.json", **k),
            "tagging": lambda **k: run.TaggingConfig(model_dir=str(tmp_path), data_dir="conll", **k)}[story]
    with pytest.raises(ValueError, match=r"^preset='bert_tiny_en_uncased' and init_checkpoint='runs/export': give one "
                                         r"of them \(--preset or --init_checkpoint\), the backbone to start from$"):
        run.run(make(preset="bert_tiny_en_uncased", init_checkpoint="runs/export"))
    with pytest.raises(ValueError, match=r"^neither preset nor init_checkpoint: give one of them"):
        run.run(make())


def _classifier(label_names=None, num_classes=2, multi_label=False):
    from keras_bert_impl import BertBackbone, BertClassifier

    backbone = BertBackbone(vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=16)
    return BertClassifier(backbone, num_classes, label_names=label_names, multi_label=multi_label)


def _table(path, rows):
    path.write_text("".join(json.dumps({"text": text, "label": label}) + "\n" for text, label in rows),
                    encoding="utf-8")
    return str(path)


def test_table_predicting_only_needs_a_fine_tuned_model_and_a_file_to_label(tmp_path):
    """`epochs=0` (the recipe's `--epochs 0`): a fine-tuned `model.keras`, and a test or validation file; what is
    missing or not read is one line before any file is read."""
    from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig, check_flags

    def config(**changes):
        fields = dict(train_file=None, validation_file=None, text_column="text", label_column=None, model_dir="out",
                      preset="run/model.keras", epochs=0, test_file="new.csv")
        return TableClassificationConfig(**{**fields, **changes})

    check_flags(config())  # a fine-tuned model labels new rows
    check_flags(config(test_file=None, validation_file="dev.csv", label_column="label"))  # or scores a labelled file
    with pytest.raises(ValueError, match=r"^--epochs=0 predicts without training, but --preset all_minilm_l6_v2_en "
                                         r"has no trained classification head"):
        check_flags(config(preset="all_minilm_l6_v2_en"))
    with pytest.raises(ValueError, match=r"^--epochs 0 predicts only: give --test_file \(texts to label\) or "
                                         r"--validation_file"):
        check_flags(config(test_file=None))
    with pytest.raises(ValueError, match=r"^--epochs 0 predicts only and reads no --train_file"):
        check_flags(config(train_file="train.csv"))
    with pytest.raises(ValueError, match=r"^--validation_file is scored against its labels: give --label_column too$"):
        check_flags(config(validation_file="dev.csv"))
    with pytest.raises(ValueError, match=r"^--epochs 2 trains: give --train_file and --label_column too$"):
        check_flags(config(epochs=2, validation_file="dev.csv"))
    with pytest.raises(ValueError, match=r"^--epochs=-1: must be an integer >= 1"):
        check_flags(config(epochs=-1))


def test_table_a_fine_tuned_models_labels_bind_the_tables_before_it_is_loaded(tmp_path, monkeypatch):
    """A run's `model.keras` as `preset`: its labels and kind (labels, several labels, a score) are read from the file
    without building it; a table label it does not know, or a flag that contradicts it, is one line."""
    from keras_bert_impl.tasks.classification import table_run
    from keras_bert_impl.tasks.classification.table_files import UnknownLabelError

    model = tmp_path / "model.keras"
    _classifier(["negative", "positive"]).save(model)
    rows = [("a charming journey", "positive"), ("no wit , only labored gags", "negative")]
    train = _table(tmp_path / "train.jsonl", rows + [("a thin plot", "mixed")])
    dev = _table(tmp_path / "dev.jsonl", rows)
    config = table_run.TableClassificationConfig(None, dev, "text", "label", str(tmp_path / "out"),
                                                 preset=str(model), epochs=0)
    inputs = table_run.read_inputs(config)
    assert inputs.train is None and inputs.test is None and len(inputs.validation) == 2
    assert (inputs.label_names, inputs.regression, inputs.multi_label) == (["negative", "positive"], False, False)

    _refuse_models(monkeypatch, table_run)
    trained_further = table_run.TableClassificationConfig(train, dev, "text", "label", str(tmp_path / "out"),
                                                          preset=str(model), epochs=1)
    with pytest.raises(UnknownLabelError, match=r"train.jsonl, line 3, column 'label': label 'mixed' is not among the "
                                                r"fine-tuned model's labels \['negative', 'positive'\]"):
        table_run.run(trained_further)
    with pytest.raises(ValueError, match=r"^--regression, but --init_checkpoint .*model.keras is a classifier of the "
                                         r"labels \['negative', 'positive'\]: leave --regression out$"):
        table_run.run(table_run.TableClassificationConfig(None, dev, "text", "label", "out", preset=str(model),
                                                          epochs=0, regression=True))
    with pytest.raises(ValueError, match=r"^--multi_label, but --init_checkpoint .*model.keras is a classifier of the "
                                         r"labels \['negative', 'positive'\]: leave --multi_label out$"):
        table_run.read_inputs(table_run.TableClassificationConfig(None, dev, "text", "label", "out",
                                                                  preset=str(model), epochs=0, multi_label=True))

    regressor = tmp_path / "regressor" / "model.keras"
    regressor.parent.mkdir()
    _classifier(num_classes=1).save(regressor)
    scores = _table(tmp_path / "scores.jsonl", [("a charming journey", 4.5), ("labored gags", 0.5)])
    inputs = table_run.read_inputs(table_run.TableClassificationConfig(None, scores, "text", "label", "out",
                                                                       preset=str(regressor), epochs=0))
    assert (inputs.label_names, inputs.regression) == (None, True)  # --regression left out: the model's kind
    assert inputs.validation.labels == [4.5, 0.5]

    unnamed = tmp_path / "unnamed" / "model.keras"
    unnamed.parent.mkdir()
    _classifier().save(unnamed)
    with pytest.raises(ValueError, match=r"^--init_checkpoint .*model.keras: a classifier without label names, so "
                                         r"the labels of the tables cannot be matched to its classes; save it with "
                                         r"`BertClassifier\(label_names=\[\.\.\.\]\)`$"):
        table_run.run(table_run.TableClassificationConfig(None, dev, "text", "label", "out", preset=str(unnamed),
                                                          epochs=0))
    tagger = tmp_path / "tagger" / "model.keras"
    tagger.parent.mkdir()
    _tagger(["O", "B-LOC", "I-LOC"]).save(tagger)
    with pytest.raises(ValueError, match=r"^--init_checkpoint .*model.keras: a BertTokenClassifier, not a "
                                         r"BertClassifier; pass the model.keras of a finetune_classifier.py run$"):
        table_run.run(table_run.TableClassificationConfig(None, dev, "text", "label", "out", preset=str(tagger),
                                                          epochs=0))
