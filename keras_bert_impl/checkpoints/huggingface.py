"""Hugging Face BERT checkpoints (config.json + model.safetensors): read, map, write."""

import os


def pickle_refusal_message(directory):
    """The error text for a Hugging Face directory that only has a `pytorch_model.bin` pickle."""
    return (
        f"{directory} has only pytorch_model.bin: a Python pickle, and unpickling a file can run "
        "arbitrary code, so it is not loaded by default. Convert it once to safetensors "
        "(a plain tensor format) where you trust the file:\n"
        "  python -c \"import torch; from safetensors.torch import save_file; "
        f"sd = torch.load('{os.path.join(directory, 'pytorch_model.bin')}', weights_only=True); "
        f"save_file({{k: v.contiguous() for k, v in sd.items()}}, "
        f"'{os.path.join(directory, 'model.safetensors')}', metadata={{'format': 'pt'}})\"\n"
        "or pass allow_pytorch_pickle=True to from_preset to load it with torch.load(weights_only=True)."
    )
