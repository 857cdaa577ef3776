"""What every Hugging Face reference in these benchmarks trains with: BERT's AdamW in torch.

    >>> import torch
    >>> optimizer = bert_adamw(torch.nn.Linear(4, 2), learning_rate=2e-5)
    >>> [(group["weight_decay"], len(group["params"])) for group in optimizer.param_groups]
    [(0.01, 1), (0.0, 1)]
"""

NO_DECAY = ("bias", "LayerNorm.weight")


def bert_adamw(model, learning_rate, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
    """`torch.optim.AdamW` with weight decay on every weight but the biases and LayerNorm scales (BERT's recipe,
    as `GlobalClipAdamW` has it on our side)."""
    import torch

    named = list(model.named_parameters())
    groups = [
        {"params": [p for n, p in named if not any(k in n for k in NO_DECAY)], "weight_decay": weight_decay},
        {"params": [p for n, p in named if any(k in n for k in NO_DECAY)], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, eps=eps)


def apply_gradients(loss, model, optimizer, scheduler):
    """One optimizer step from `loss`: backward, global-norm clipping at 1.0, AdamW and schedule steps."""
    import torch

    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
