"""Step 5, outputs: `predictions.json`, `null_odds.json` (v2.0) and `eval.json`, in the official formats, atomically."""

import os

from keras_bert_impl.checkpoints.atomic_files import atomic_write_json


def write_squad_outputs(model_dir, result, extra_eval=None):
    """Writes `predictions.json`, `null_odds.json` (v2.0) and `eval.json` to `model_dir` atomically.

    Returns:
        dict name -> path of the files written.
    """
    os.makedirs(model_dir, exist_ok=True)
    paths = {"predictions": os.path.join(model_dir, "predictions.json")}
    atomic_write_json(paths["predictions"], result.predictions)
    if result.null_odds:
        paths["null_odds"] = os.path.join(model_dir, "null_odds.json")
        atomic_write_json(paths["null_odds"], result.null_odds)
    paths["eval"] = os.path.join(model_dir, "eval.json")
    atomic_write_json(paths["eval"], dict(result.metrics, **(extra_eval or {})))
    return paths
