"""A pretraining run's export: the trained `BertPretrainer` saved as a preset (backbone, masked-LM and
next-sentence heads, vocabulary) that records the architecture's dropout, not the run's `--dropout`.
"""

import dataclasses
import inspect

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.training.pretraining_config import backbone_config


def export_pretrainer(model, export_dir, config):
    """Saves the pretrainer as a preset: the backbone, and the trained masked-LM (and next-sentence) heads in its
    `task.json` / `task.weights.h5`, so `BertPretrainer.from_preset(export_dir)` continues pretraining or fills
    masks with them, while the task models and `BertBackbone.from_preset` read the backbone alone. It records the
    architecture's dropout, not the run's `--dropout`.

    `--dropout` is a pretraining choice (0 for short runs); fine-tuning from
    the export uses the dropout of the `--config` or `--init_checkpoint` it was built from.
    """
    from keras_bert_impl.checkpoints.own_preset import save_backbone_preset

    if config.init_checkpoint:
        from keras_bert_impl.checkpoints.loading import read_preset_config

        architecture = read_preset_config(config.init_checkpoint)
    else:
        architecture = backbone_config(dataclasses.replace(config, dropout=None), model.backbone.vocabulary_size)
    if "dropout" not in architecture:  # a JSON --config that leaves BertBackbone's default
        architecture["dropout"] = inspect.signature(BertBackbone).parameters["dropout"].default
    overrides = {"dropout": architecture["dropout"]}
    packing = {"sequence_length": config.sequence_length, "max_predictions_per_seq": config.max_predictions_per_seq}

    def write_task_files(directory):  # the run's packing, for `BertPretrainer.from_preset(export_dir)`'s preprocessor
        model.write_task_files(directory, preprocessor_config=packing)

    save_backbone_preset(model.backbone, export_dir, vocabulary=config.vocab, lowercase=config.lowercase,
                         config_overrides=overrides, write_task_files=write_task_files)
