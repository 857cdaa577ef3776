"""Step 5, outputs: `predictions.json`, `null_odds.json` (v2.0) and `eval.json`, in the official formats, atomically.

Example: answers to the first two questions of the SQuAD v1.1 dev slice (tests/data/slices/squad), "Which NFL team
represented the AFC at Super Bowl 50?" (right) and "... the NFC ...?" (wrong), scored and written:

>>> import gzip, json, pathlib, shutil, tempfile, keras_bert_impl
>>> from keras_bert_impl.metrics.squad import evaluate_v1
>>> from keras_bert_impl.tasks.span_qa.evaluation import SquadResult
>>> squad = pathlib.Path(keras_bert_impl.__file__).parents[1] / "tests/data/slices/squad/dev-v1.1.json.gz"
>>> paragraph = json.loads(gzip.decompress(squad.read_bytes()))["data"][0]["paragraphs"][0]
>>> gold = [{"paragraphs": [dict(paragraph, qas=paragraph["qas"][:2])]}]
>>> predictions = {"56be4db0acb8001400a502ec": "Denver Broncos", "56be4db0acb8001400a502ed": "the Broncos"}
>>> result = SquadResult(predictions, {}, evaluate_v1(gold, predictions), None, num_windows=2, predict_seconds=0.0)
>>> model_dir = tempfile.mkdtemp()
>>> paths = write_squad_outputs(model_dir, result, extra_eval={"num_windows": 2})
>>> sorted(paths), json.loads(pathlib.Path(paths["eval"]).read_text())  # v1.1: no null_odds.json
(['eval', 'predictions'], {'exact_match': 50.0, 'f1': 50.0, 'num_windows': 2})
>>> json.loads(pathlib.Path(paths["predictions"]).read_text()) == predictions
True
>>> shutil.rmtree(model_dir)
"""

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


# Step 5's name in every task (`classification.write_outputs`, `tagging.write_outputs`, `span_qa.write_outputs`; docs/architecture.md).
write_outputs = write_squad_outputs
