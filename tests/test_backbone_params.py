"""The preset table's parameter counts equal count_params() of the built models (the published figures)."""

import pytest

from keras_bert_impl import BertBackbone


@pytest.mark.parametrize(
    "name, published",
    [
        ("bert_tiny_en_uncased", 4_385_920),
        ("bert_base_en_uncased", 109_482_240),
        ("bert_large_en_uncased", 335_141_888),
    ],
)
def test_table_params_equal_built_model(name, published):
    # load_weights=False builds from the table's config, with no download.
    backbone = BertBackbone.from_preset(name, load_weights=False)
    assert backbone.count_params() == published
    assert BertBackbone.presets[name]["metadata"]["params"] == published
