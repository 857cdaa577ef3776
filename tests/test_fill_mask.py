"""`BertPretrainer.fill_mask`: Hugging Face's fill-mask pipeline on raw text, checked against that pipeline.

The reference: transformers' `BertForMaskedLM` on the real all-MiniLM-L6-v2 encoder with seeded masked-LM heads
(MiniLM has none), saved by `save_pretrained` as `run_mlm.py` saves (no pooler), read by
`pipeline("fill-mask")` and by our `BertPretrainer.from_preset`. The text: held-out lines of the public-domain
corpus bundled in the package, one word of each written as `[MASK]`.
"""

import pathlib
import shutil

import numpy as np
import pytest

from keras_bert_impl import BertPretrainer

VALID = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_impl" / "assets" / "corpus" / "valid.txt"


@pytest.fixture(scope="module")
def masked_lm_dir(tmp_path_factory, minilm_dir):
    import torch
    import transformers

    directory = tmp_path_factory.mktemp("masked_lm")
    torch.manual_seed(0)
    reference = transformers.BertForMaskedLM.from_pretrained(str(minilm_dir)).eval()
    with torch.no_grad():  # new heads: moved far from their initial values, so that a head left new would show
        for parameter in reference.cls.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    reference.save_pretrained(str(directory), safe_serialization=True)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(minilm_dir / name, directory / name)
    return directory


@pytest.fixture(scope="module")
def masked_texts():
    """Six held-out lines with their fourth word written as [MASK]; one with two masks, one with the marker
    against a word."""
    lines = [line.split() for line in VALID.read_text(encoding="utf-8").splitlines() if len(line.split()) >= 8][:6]
    texts = [" ".join(words[:3] + ["[MASK]"] + words[4:]) for words in lines[:4]]
    texts.append(" ".join(lines[4][:2] + ["[MASK]"] + lines[4][3:6] + ["[MASK]"] + lines[4][7:]))
    texts.append(" ".join(lines[5][:3]) + "[MASK] " + " ".join(lines[5][4:]))
    return texts


@pytest.mark.slow
@pytest.mark.multibackend
def test_fill_mask_equals_the_hugging_face_pipeline(masked_lm_dir, masked_texts):
    import transformers

    model = BertPretrainer.from_preset(str(masked_lm_dir), nsp=False)
    assert model.heads_loaded == ["masked LM"]
    assert sorted(model.backbone.load_report.left_new) == ["pooled_dense/bias", "pooled_dense/kernel"]
    ours = model.fill_mask(masked_texts, top_k=5, batch_size=4)  # two batches, of different widths
    reference = transformers.pipeline("fill-mask", model=str(masked_lm_dir), top_k=5)(masked_texts)
    assert len(ours) == len(reference) == 6
    for text, our_masks, reference_masks in zip(masked_texts, ours, reference):
        if text.count("[MASK]") == 1:
            our_masks, reference_masks = [our_masks], [reference_masks]
        assert len(our_masks) == len(reference_masks) == text.count("[MASK]")
        for slot, (our_top, reference_top) in enumerate(zip(our_masks, reference_masks)):
            assert [p["token"] for p in our_top] == [p["token"] for p in reference_top], text
            assert [p["token_str"] for p in our_top] == [p["token_str"] for p in reference_top]
            np.testing.assert_allclose([p["score"] for p in our_top], [p["score"] for p in reference_top],
                                       rtol=1e-4, atol=1e-6)
            for prediction in our_top:  # the text itself with this [MASK] filled, the other masks kept
                assert prediction["sequence"] == expected_sequence(text, slot, prediction["token_str"])
    single = model.fill_mask(masked_texts[0], top_k=2)  # one text, one mask: the list of predictions itself
    assert [p["token"] for p in single] == [p["token"] for p in ours[0][:2]]


@pytest.mark.slow
@pytest.mark.multibackend
def test_fill_mask_targets_equal_the_hugging_face_pipelines(masked_lm_dir, masked_texts):
    # Before: `targets=`, the pipeline's argument, was a TypeError. A piece of the vocabulary is itself; "Paris"
    # (uncased vocabulary: paris) and "unaffable" (several pieces) are their first piece, warned, as the pipeline
    # does; a text of no piece (a control character) is left out, warned.
    import transformers

    model = BertPretrainer.from_preset(str(masked_lm_dir), nsp=False)
    pipeline = transformers.pipeline("fill-mask", model=str(masked_lm_dir))
    targets = ["the", "a", "his", "Paris", "unaffable", "\u200b"]
    with pytest.warns(UserWarning) as caught:
        ours = model.fill_mask(masked_texts, top_k=4, targets=targets)
    assert [str(w.message) for w in caught if str(w.message).startswith("fill_mask")] == [
        "fill_mask: target 'Paris' is not a piece of the vocabulary: it is scored as its first piece, 'paris' (as "
        "Hugging Face's fill-mask pipeline does).",
        "fill_mask: target 'unaffable' is not a piece of the vocabulary: it is scored as its first piece, 'una' (as "
        "Hugging Face's fill-mask pipeline does).",
        f"fill_mask: target {targets[-1]!r} has no piece in the vocabulary: it is left out."]
    reference = pipeline(masked_texts, top_k=4, targets=targets)
    for text, our_masks, reference_masks in zip(masked_texts, ours, reference):
        if text.count("[MASK]") == 1:
            our_masks, reference_masks = [our_masks], [reference_masks]
        for our_top, reference_top in zip(our_masks, reference_masks):
            assert [p["token_str"] for p in our_top] == [p["token_str"] for p in reference_top], text
            np.testing.assert_allclose([p["score"] for p in our_top], [p["score"] for p in reference_top],
                                       rtol=1e-4, atol=1e-6)
    # Fewer targets than top_k: each of them, best first; one target as a string.
    assert [p["token_str"] for p in model.fill_mask(masked_texts[0], top_k=5, targets=["the", "a"])] in (
        ["the", "a"], ["a", "the"])
    assert [p["token_str"] for p in model.fill_mask(masked_texts[0], targets="the")] == ["the"]
    for targets, message in (([], "`targets` must be a string or a non-empty list of strings, got []."),
                             (["the", 3], "`targets`: item 1 is int 3, expected a string."),
                             (["\u200b"], "`targets` ['\\u200b']: none has a piece in the vocabulary.")):
        with pytest.raises(ValueError) as error:
            model.fill_mask(masked_texts[0], targets=targets)
        assert str(error.value) == message


def test_a_pretrainer_saved_for_transformers_fills_masks_the_same(masked_lm_dir, masked_texts, tmp_path):
    """`save_huggingface` of an MLM + NSP pretrainer: a `BertForPreTraining` directory whose fill-mask pipeline gives
    our tokens and scores."""
    import transformers

    model = BertPretrainer.from_preset(str(masked_lm_dir))
    model.save_huggingface(tmp_path / "exported")
    assert transformers.AutoConfig.from_pretrained(str(tmp_path / "exported")).architectures == ["BertForPreTraining"]
    expected = transformers.pipeline("fill-mask", model=str(tmp_path / "exported"), top_k=3)(masked_texts[:2])
    ours = model.fill_mask(masked_texts[:2], top_k=3)
    for our_top, reference_top in zip(ours, expected):
        assert [p["token"] for p in our_top] == [p["token"] for p in reference_top]
        np.testing.assert_allclose([p["score"] for p in our_top], [p["score"] for p in reference_top], rtol=1e-4)


def expected_sequence(text, slot, piece):
    """The text with its `slot`-th [MASK] written as `piece`: a `##` piece joins the word before it; a whole word
    written against a word (`home[MASK]`, which BERT reads as two words) gets a space."""
    parts = text.split("[MASK]")
    before, after = "[MASK]".join(parts[: slot + 1]), "[MASK]".join(parts[slot + 1 :])
    if piece.startswith("##"):
        return before.rstrip() + piece[2:] + after
    if before[-1:].isalnum() and piece[:1].isalnum():
        piece = " " + piece
    return before + piece + after


def test_masked_texts_are_the_reference_tokenizers_ids(masked_lm_dir, masked_texts):
    from tokenizers import Tokenizer

    from keras_bert_impl.text.pretrainer_preprocessor import BertPretrainerPreprocessor

    reference = Tokenizer.from_file(str(masked_lm_dir / "tokenizer.json"))
    reference.no_truncation()
    reference.no_padding()
    preprocessor = BertPretrainerPreprocessor.from_preset(str(masked_lm_dir))
    assert preprocessor.encode_masked_texts(masked_texts) == [reference.encode(t).ids for t in masked_texts]


def test_fill_mask_errors_are_one_line(masked_lm_dir, minilm_dir):
    model = BertPretrainer.from_preset(str(masked_lm_dir), nsp=False)
    cases = [
        (dict(texts=["The [MASK] sat.", "no marker here"]),
         "Text 1 has no [MASK]: 'no marker here'; write [MASK] (in capitals) where the missing piece goes."),
        (dict(texts="a [mask] in lower case"),
         "Text 0 has no [MASK]: 'a [mask] in lower case'; write [MASK] (in capitals) where the missing piece goes."),
        (dict(texts=[]), "No examples: the list of texts is empty."),
        (dict(texts=["[MASK] is", None]), "Raw text: item 1 is NoneType None, expected a string."),
        (dict(texts="[MASK]", top_k=0), "`top_k` must be an int in [1, 30522], got 0."),
        (dict(texts="[MASK]", batch_size=0), "`batch_size` must be a positive int, got 0."),
        (dict(texts="[MASK] " + "word " * 600),
         "Text 0 is 603 pieces with [CLS] and [SEP], more than the backbone's 512 positions: shorten it."),
    ]
    for arguments, message in cases:
        with pytest.raises(ValueError) as info:
            model.fill_mask(**arguments)
        assert str(info.value) == message
    bare = BertPretrainer.from_preset(str(masked_lm_dir), nsp=False, preprocessor=None)
    with pytest.raises(ValueError, match="has no `preprocessor`, so it cannot read raw strings"):
        bare.fill_mask("The [MASK] sat.")
