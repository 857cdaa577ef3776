"""The held-out evaluation that ends a pretraining run, logged once: TensorBoard's `validation/final_mlm_accuracy`
beside the unigram floor (`unigram_floor`) on the same held-out masked positions, and not written again by a rerun
of a finished run.
"""

import os

from keras_bert_impl.training.unigram_floor import unigram_floor

FINAL_VALIDATION_TAGS = ("final_mlm_accuracy", "mlm_unigram_floor")


def final_validation_logged(logs_dir, step):
    """Whether the TensorBoard events under `logs_dir/validation` hold `log_final_validation`'s values at `step`
    (a rerun of a finished run, which trains no step, then writes them no second time), as TensorBoard reads them:
    the files in name order, a run's `SessionLog.START` at or before `step` dropping what came before it
    (`pretraining_callbacks.mark_session_start`: a resumed run that trained the last steps again). An unreadable
    events file counts as not holding them."""
    import tensorflow as tf

    logged = False
    pattern = os.path.join(logs_dir, "validation", "events.out.tfevents.*")
    for path in sorted(tf.io.gfile.glob(pattern)):
        try:
            for record in tf.data.TFRecordDataset(path):  # (summary_iterator logs a deprecation warning)
                event = tf.compat.v1.Event.FromString(record.numpy())
                if event.session_log.status == tf.compat.v1.SessionLog.START and event.step <= step:
                    logged = False
                elif event.step == step and any(value.tag in FINAL_VALIDATION_TAGS for value in event.summary.value):
                    logged = True
        except Exception:  # noqa: BLE001 (a truncated events file of a killed run: write the values again)
            continue
    return logged


def log_final_validation(logs_dir, step, validation, floor):
    """TensorBoard `validation/final_mlm_accuracy` beside `validation/mlm_unigram_floor`, and the floor's guess as the
    text `validation/mlm_unigram_floor_guess` (the chief calls it)."""
    import tensorflow as tf

    writer = tf.summary.create_file_writer(os.path.join(logs_dir, "validation"))
    with writer.as_default(step=step):
        if "mlm_accuracy" in validation:
            tf.summary.scalar("final_mlm_accuracy", float(validation["mlm_accuracy"]))
        tf.summary.scalar("mlm_unigram_floor", floor["accuracy"])
        # Its own tag: beside the scalar of the same name, TensorBoard drew the text as a second value of that step.
        tf.summary.text("mlm_unigram_floor_guess", f"Always guessing `{floor['token']}` scores {floor['accuracy']:.4f} "
                        f"on the {floor['masked_positions']} held-out masked positions.")
    writer.close()


def evaluate_held_out(model, validation_data, validation_feed, config, tokenizer, chief, logs_dir):
    """The run's last held-out evaluation, `(metrics, floor)`: `model.evaluate` on `validation_feed` and the
    `unigram_floor` of `validation_data` with the floor's token (`{}, None` without `--validation_files`); the chief
    logs both (`log_final_validation`) unless the events hold them already."""
    validation = {}
    floor = None
    if validation_data is not None:
        validation = model.evaluate(validation_feed, steps=config.validation_steps, verbose=0,
                                    return_dict=True)
        # The same held-out batches (`held_out_dataset`: every iterator reads the same ones), the same weights.
        floor = unigram_floor(validation_data, config.validation_steps)
        if floor is not None:
            floor["token"] = tokenizer.id_to_token(floor["token_id"])
            if chief and not final_validation_logged(logs_dir, config.num_steps):
                # (rerunning a finished run evaluates again, and prints; TensorBoard has the values already)
                log_final_validation(logs_dir, config.num_steps, validation, floor)
    return validation, floor
