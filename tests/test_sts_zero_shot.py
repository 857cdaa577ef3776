"""benchmarks/sts_zero_shot.py on real STS-B dev pairs: the word-overlap baseline, and a checkpoint trained for
sentence similarity (all-MiniLM-L6-v2, a sentence-transformers model) scoring far above it with mean pooling."""

import json

import pytest

from repo_scripts import load_script


def test_word_jaccard_counts_shared_lowercased_words():
    script = load_script("benchmarks/sts_zero_shot.py")
    assert script.word_jaccard("A man is playing a guitar.", "a MAN plays the guitar") == pytest.approx(3 / 7)
    assert script.word_jaccard("", "") == 0.0


@pytest.mark.slow
def test_a_similarity_model_beats_word_overlap_zero_shot(shared_data, capsys):
    script = load_script("benchmarks/sts_zero_shot.py")
    script.main(["--checkpoints", "all_minilm_l6_v2_en", "--data_dir", str(shared_data / "glue"),
                 "--sequence_length", "64", "--poolings", "mean"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["pairs"] == 1500
    assert 0.6 < report["word_jaccard"]["pearson"] < 0.7  # 0.650
    minilm = report["all_minilm_l6_v2_en"]
    assert set(minilm) == {"mean_cosine", "embedding_bag_cosine"}
    # The model's own pooling (mean) is what sentence-transformers reports on STS-B: far above word overlap.
    assert minilm["mean_cosine"]["pearson"] > 0.8 > report["word_jaccard"]["pearson"]
