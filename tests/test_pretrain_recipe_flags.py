"""recipes/pretrain.py's command line: a bad flag value is one line, --warmup_steps's and --checkpoint_every's defaults fit a short run,
--vocab is checked after the training files and named with the file when it is not UTF-8, and the summary of a
resumed run lists the held-out accuracy of every checkpoint of the run.
"""

import glob
import json
import os

import pytest
from repo_scripts import load_script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO, "keras_bert_impl", "assets", "corpus")
VOCAB = os.path.join(CORPUS, "vocab.txt")
MICRO = {"num_layers": 1, "num_heads": 2, "hidden_dim": 16, "intermediate_dim": 32, "max_sequence_length": 64}


def _micro_run(tmp_path, **settings):
    """The settings of a micro pretraining run (MICRO, batches of 4 of the bundled corpus) in `tmp_path / "run"`."""
    config = tmp_path / "micro_bert.json"
    config.write_text(json.dumps(MICRO))
    return dict(dict(strategy="cpu", config=str(config), vocab=VOCAB, train_files=[os.path.join(CORPUS, "train.txt")],
                     validation_files=[os.path.join(CORPUS, "valid.txt")], global_batch_size=4, sequence_length=32,
                     max_predictions_per_seq=5, keep_checkpoints=1, log_every=1000, verbose=0,
                     model_dir=str(tmp_path / "run")), **settings)


def _recipe():
    return load_script("recipes/pretrain.py")


def _error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize("flags, message", [
    (("--learning_rate", "abc"), "argument --learning_rate: invalid float value: 'abc'"),
    (("--num_steps", "abc"), "argument --num_steps: invalid int value: 'abc'"),
    (("--warmup_steps", "1.5"), "argument --warmup_steps: invalid int value: '1.5'"),
    (("--optimizer", "sgd"), "argument --optimizer: invalid choice: 'sgd' (choose from 'adamw', 'lamb')"),
    (("--steps_per_execution", "x"), "argument --steps_per_execution: expected auto or an integer >= 1, got 'x'"),
    (("--seed", "-1"), "argument --seed: must be an integer from 0 to 4294967295 (2**32 - 1), got -1"),
    (("--bogus", "1"), "unrecognized arguments: --bogus 1"),
])
def test_a_flag_of_the_wrong_type_is_one_line(flags, message, capsys):
    with pytest.raises(SystemExit) as leaving:
        _recipe().parse_args([*flags, "--model_dir", "/tmp/unused"])
    assert leaving.value.code == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {message} (see --help)\n" and captured.out == ""


def test_help_says_what_vocab_warmup_steps_and_checkpoint_every_default_to(capsys):
    with pytest.raises(SystemExit):
        _recipe().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("--vocab VOCAB WordPiece vocab.txt, UTF-8, one token a line: the default is --init_checkpoint's own, "
            "else the bundled corpus vocab without --train_files (needed with --train_files from scratch)") in text
    assert ("--lowercase, --no-lowercase lowercase the text before WordPiece (default: --init_checkpoint's casing, "
            "else on)") in text
    assert "(default: min(100, --num_steps // 10): 100 for the default 1,000 steps, 0 for a run of under 10" in text
    assert ("(default: the largest divisor of --num_steps up to 500: 500 for the default 1,000 steps, --num_steps "
            "itself for a run of up to 500; a resumed run keeps the one it was started with)") in text


def test_warmup_steps_default_scales_with_a_short_run_and_keeps_the_default_runs():
    from keras_bert_impl.training.pretraining_run import PretrainingConfig

    assert PretrainingConfig().resolved().warmup_steps == 100  # the default run's, unchanged
    assert PretrainingConfig(num_steps=5).resolved().warmup_steps == 0
    assert PretrainingConfig(num_steps=300).resolved().warmup_steps == 30
    assert PretrainingConfig(num_steps=5, warmup_steps=3).resolved().warmup_steps == 3
    config, _, _ = _recipe().parse_args(["--num_steps", "5"])
    assert config.warmup_steps is None and config.resolved().warmup_steps == 0


def test_a_starting_checkpoint_brings_its_vocabulary_and_casing(minilm_dir, tmp_path):
    """Before: `--init_checkpoint all_minilm_l6_v2_en` on the bundled corpus stopped at 'has vocabulary_size=30522
    but --vocab .../corpus/vocab.txt has 4291 tokens', and a cased checkpoint was fed lowercased text unless
    --no-lowercase was given: a real BERT could not go on learning on the README's main job."""
    from keras_bert_impl import BertBackbone
    from keras_bert_impl.training.pretraining_run import PretrainingConfig

    config = PretrainingConfig(init_checkpoint="all_minilm_l6_v2_en").resolved()
    assert os.path.samefile(config.vocab, minilm_dir / "vocab.txt") and config.lowercase is True
    assert config.train_files == [os.path.join(CORPUS, "train.txt")]  # the bundled corpus, with the model's vocab
    cased = tmp_path / "cased"
    BertBackbone(vocabulary_size=4291, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                 max_sequence_length=64).save_to_preset(str(cased), vocabulary=VOCAB, lowercase=False)
    config = PretrainingConfig(init_checkpoint=str(cased)).resolved()
    assert os.path.samefile(config.vocab, cased / "vocab.txt") and config.lowercase is False
    # What is given stays: --vocab, --lowercase; and without a starting checkpoint the text is lowercased.
    config = PretrainingConfig(init_checkpoint=str(cased), vocab=VOCAB, lowercase=True).resolved()
    assert (config.vocab, config.lowercase) == (VOCAB, True)
    assert PretrainingConfig().resolved().lowercase is True



def test_a_starting_checkpoint_that_is_a_file_names_the_flag(tmp_path):
    """Before: 'Preset X is a file; from_preset takes ...': the library's words, without the recipe's flag."""
    from keras_bert_impl.training.pretraining_run import PretrainingConfig

    model_file = tmp_path / "model.keras"
    model_file.write_bytes(b"")
    with pytest.raises(ValueError) as error:
        PretrainingConfig(init_checkpoint=str(model_file)).resolved()
    assert str(error.value).startswith(f"--init_checkpoint: Preset {model_file} is a saved Keras model (model.save), "
                                       "which from_preset does not read; from_preset takes a preset name, ")

@pytest.mark.slow
def test_a_preset_name_as_config_says_it_trains_from_scratch(tmp_path, capsys):
    """`--preset bert_tiny_en_uncased` (pretrain.py's alias of --config, as keras-hub users type a preset) builds
    that architecture with new weights: the run says so, and how to start from the preset's weights instead."""
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    run_pretraining(PretrainingConfig(**_micro_run(tmp_path, config="bert_tiny_en_uncased", num_steps=2,
                                                   checkpoint_every=2)))
    assert ("--config bert_tiny_en_uncased: its architecture, trained from scratch (to go on from its weights and "
            "vocabulary: --init_checkpoint bert_tiny_en_uncased).") in capsys.readouterr().out.splitlines()


def _start(tmp_path, *flags):
    """main() of a run that is refused before any work: its exit status and its error lines."""
    return _recipe().main(["--num_steps", "4", "--checkpoint_every", "2", "--model_dir", str(tmp_path / "run"),
                           *flags])


def test_an_explicit_warmup_above_num_steps_is_still_refused(tmp_path, capsys):
    assert _start(tmp_path, "--warmup_steps", "30") == 2
    assert _error_lines(capsys.readouterr().err) == [
        "error: --warmup_steps=30 must be an integer in [0, --num_steps=4]: the warm-up must end within the run"]


def test_the_training_files_are_checked_before_the_missing_vocab(tmp_path, capsys):
    missing = tmp_path / "trian.txt"
    assert _start(tmp_path, "--train_files", str(missing)) == 2
    assert _error_lines(capsys.readouterr().err) == [f"error: --train_files: no file matches '{missing}'"]
    folder = tmp_path / "corpus"
    folder.mkdir()
    assert _start(tmp_path, "--train_files", str(folder)) == 2
    assert _error_lines(capsys.readouterr().err) == [f"error: --train_files: '{folder}' matches only directories"]
    assert _start(tmp_path, "--train_files", os.path.join(CORPUS, "train.txt")) == 2
    assert _error_lines(capsys.readouterr().err) == [
        "error: --vocab is required with --train_files: a WordPiece vocab.txt, one token a line "
        "(recipes/build_vocab.py makes one from the corpus; the bundled corpus vocab is the default only without "
        "--train_files)"]
    assert not (tmp_path / "run").exists()


def test_a_vocab_that_is_not_utf8_names_the_flag_the_file_and_the_iconv_command(tmp_path, capsys, real_data):
    bad = str(real_data / "bad_input" / "pg84_cp1252_excerpt.txt")
    assert _start(tmp_path, "--vocab", bad) == 2
    assert _error_lines(capsys.readouterr().err) == [
        f"error: --vocab: {bad}, line 25, column 17: byte 0x97 at byte offset 1570 of the file is not valid UTF-8; "
        "the file looks like Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8 "
        "pg84_cp1252_excerpt.txt > utf8_pg84_cp1252_excerpt.txt"]
    assert not (tmp_path / "run").exists()


def test_a_vocab_directory_or_a_vocab_with_a_duplicate_token_is_one_line(tmp_path, capsys):
    assert _start(tmp_path, "--vocab", CORPUS) == 2
    assert _error_lines(capsys.readouterr().err) == [
        f"error: --vocab {CORPUS} is a directory: pass its vocab.txt (a WordPiece vocabulary, one token a line)"]
    twice = tmp_path / "vocab.txt"
    twice.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nthe\n", encoding="utf-8")
    assert _start(tmp_path, "--vocab", str(twice)) == 2
    errors = _error_lines(capsys.readouterr().err)
    assert len(errors) == 1 and errors[0].startswith(f"error: --vocab: {twice}, line 7"), errors


def _final_validation_tags(model_dir):
    import tensorflow as tf

    found = []
    for path in glob.glob(os.path.join(model_dir, "logs", "validation", "events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            found += [(event.step, value.tag) for value in event.summary.value
                      if value.tag == "final_mlm_accuracy"]
    return sorted(found)


@pytest.mark.slow
def test_a_resumed_run_reports_every_checkpoints_held_out_accuracy_and_keeps_its_warmup(tmp_path, capsys):
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    model_dir = tmp_path / "run"
    run = _micro_run(tmp_path, checkpoint_every=10, validation_steps=1)
    first = run_pretraining(PretrainingConfig(num_steps=10, **run))  # warm-up 1 (10 // 10)
    assert [step for step, _ in first["held_out_curve"]] == [10]
    # Extended to 20 steps (a resume): the default warm-up stays the run's 1, not 20 // 10.
    second = run_pretraining(PretrainingConfig(num_steps=20, **run))
    assert "--warmup_steps" not in capsys.readouterr().out
    assert json.loads((model_dir / "run_config.json").read_text())["warmup_steps"] == 1
    assert second["resumed_from_step"] == 10
    # ckpt-10 is gone (keep_checkpoints=1); its accuracy is still reported, with ckpt-20's.
    assert [os.path.basename(p) for p in glob.glob(str(model_dir / "checkpoints" / "ckpt-*"))] == ["ckpt-000000020"]
    assert second["held_out_curve"][0] == first["held_out_curve"][0]
    assert [step for step, _ in second["held_out_curve"]] == [10, 20]
    assert _final_validation_tags(model_dir) == [(10, "final_mlm_accuracy"), (20, "final_mlm_accuracy")]
    # The finished run again: the same curve, and no second final_mlm_accuracy in TensorBoard.
    again = run_pretraining(PretrainingConfig(num_steps=20, **run))
    assert again["held_out_curve"] == second["held_out_curve"]
    assert _final_validation_tags(model_dir) == [(10, "final_mlm_accuracy"), (20, "final_mlm_accuracy")]


@pytest.mark.slow
def test_checkpoint_every_default_divides_a_short_run_and_a_resumed_run_keeps_its_own(tmp_path, capsys):
    """`--num_steps 5` without `--checkpoint_every` runs (it stopped on `--checkpoint_every=500` before); the default
    run keeps its 500; extending a run keeps its interval rather than the new --num_steps's default, and a
    --num_steps that is not a multiple of it is refused in one line that names the run's interval."""
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    assert PretrainingConfig().resolved().checkpoint_every == 500
    assert PretrainingConfig(num_steps=5).resolved().checkpoint_every == 5
    assert PretrainingConfig(num_steps=1200).resolved().checkpoint_every == 400
    assert PretrainingConfig(num_steps=6, checkpoint_every=3).resolved().checkpoint_every == 3
    config, _, _ = _recipe().parse_args(["--num_steps", "5"])
    assert config.checkpoint_every is None and config.resolved().checkpoint_every == 5

    model_dir = tmp_path / "run"
    run = _micro_run(tmp_path, validation_steps=1)
    first = run_pretraining(PretrainingConfig(num_steps=4, **run))
    assert [step for step, _ in first["held_out_curve"]] == [4]
    second = run_pretraining(PretrainingConfig(num_steps=8, **run))  # 8's own default would be 8
    assert "--checkpoint_every" not in capsys.readouterr().out
    assert second["resumed_from_step"] == 4 and [step for step, _ in second["held_out_curve"]] == [4, 8]
    assert json.loads((model_dir / "run_config.json").read_text())["checkpoint_every"] == 4
    message = (f"--num_steps=10 must be a multiple of --checkpoint_every=4, the interval of the run in {model_dir} "
               "(training runs in epochs of checkpoint_every steps): pass --num_steps 12")
    for given in ({}, {"checkpoint_every": 4}):  # the run's interval given again: not `add --checkpoint_every 2`
        with pytest.raises(ValueError) as refused:
            run_pretraining(PretrainingConfig(num_steps=10, **given, **run))
        assert str(refused.value) == message
    # A --num_steps with no divisor from 50 to 500: the default interval is named as such (it said
    # `--checkpoint_every=500`, a flag never given).
    with pytest.raises(ValueError) as refused:
        run_pretraining(PretrainingConfig(num_steps=503, **dict(run, model_dir=str(tmp_path / "prime"))))
    assert str(refused.value) == (
        "--num_steps=503 has no divisor from 50 to 500 for the default --checkpoint_every (checkpoints, each followed "
        "by the held-out evaluation, come every checkpoint_every steps, and --num_steps must be a multiple of it): "
        "pass --checkpoint_every 503 (one checkpoint, at the end), or --num_steps 500 or 1000")
    # The run's model_dir given where a preset goes: its export is named.
    from keras_bert_impl import BertBackbone

    with pytest.raises(ValueError) as refused:
        BertBackbone.from_preset(str(model_dir))
    assert str(refused.value) == (f"{model_dir} is the model_dir of a pretraining run (recipes/pretrain.py): its "
                                  f"trained model is {model_dir / 'export'}, pass that")


@pytest.mark.slow
def test_tensorboard_shows_the_steps_a_resumed_run_trains_again_once(tmp_path):
    """A run stopped after logging steps its last checkpoint does not hold (here: steps 5-8 logged, the checkpoint of
    step 8 gone) trains them again on resume. TensorBoard's Python reader (`--load_fast=false`; its default, the Rust
    data server, drops them by their steps alone) then holds each step once, the resumed run's value: each writer
    marks the run's start with a `SessionLog.START` event, which drops what was logged at and after it."""
    import shutil

    import numpy as np
    import tensorflow as tf
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    model_dir = tmp_path / "run"
    run = _micro_run(tmp_path, num_steps=8, checkpoint_every=4, keep_checkpoints=3, log_every=1, validation_steps=1)
    run_pretraining(PretrainingConfig(**run))

    def logged(run_name, tags=("loss", "mlm_accuracy")):
        reader = EventAccumulator(str(model_dir / "logs" / run_name), size_guidance={"tensors": 0})
        reader.Reload()
        return {tag: [(event.step, float(np.asarray(tf.make_ndarray(event.tensor_proto))))
                      for event in reader.Tensors(tag)] for tag in tags}

    first = logged("train")
    assert [step for step, _ in first["loss"]] == list(range(1, 9))
    shutil.rmtree(model_dir / "checkpoints" / "ckpt-000000008")  # stopped before its last checkpoint
    assert run_pretraining(PretrainingConfig(**run))["resumed_from_step"] == 4
    again = logged("train")
    assert [step for step, _ in again["loss"]] == list(range(1, 9))
    assert again["loss"][:4] == first["loss"][:4]  # steps 1-4 of the first run, 5-8 of the resumed one
    assert [step for step, _ in logged("validation")["loss"]] == [4, 8]
    # The final values once, each a number (the floor's guess, a text, has its own tag: it was a second value of the
    # scalar's step, which did not convert to a number).
    final = logged("validation", ("final_mlm_accuracy", "mlm_unigram_floor"))
    assert [step for step, _ in final["final_mlm_accuracy"]] == [step for step, _ in final["mlm_unigram_floor"]] == [8]


@pytest.mark.slow
def test_a_resume_on_another_held_out_set_does_not_mix_it_into_the_curve(tmp_path, capsys):
    """--validation_steps (or --validation_files) may change on resume; the accuracies measured on the old held-out
    set are then left out of the run's curve, with a line that says so, instead of one list mixing two sets."""
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    run = _micro_run(tmp_path, checkpoint_every=4, keep_checkpoints=3)
    run_pretraining(PretrainingConfig(num_steps=4, validation_steps=1, **run))
    same = run_pretraining(PretrainingConfig(num_steps=8, validation_steps=1, **run))
    assert [step for step, _ in same["held_out_curve"]] == [4, 8]
    assert "held-out set changed" not in capsys.readouterr().out
    other = run_pretraining(PretrainingConfig(num_steps=12, validation_steps=2, **run))
    assert [step for step, _ in other["held_out_curve"]] == [12]
    assert ("The held-out set changed since the checkpoint (--validation_files or --validation_steps): the held-out "
            "accuracy of the earlier checkpoints is left out of the summary.\n") in capsys.readouterr().out
