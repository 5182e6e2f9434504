"""Models used by llga's tests, benchmarks, demo and notebooks.

Needs PyTorch (imported lazily). Weights are random: torchvision ships no
pretrained weights here, and none are needed to compare two runtimes.
"""

from __future__ import annotations

import math

TORCHVISION_MODELS = (
    "alexnet", "vgg11_bn", "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "densenet121",
    "squeezenet1_0", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "shufflenet_v2_x1_0",
    "regnet_y_400mf", "vit_b_16", "swin_t",
)


def torchvision_model(name: str, seed: int = 0):
    """A torchvision classifier in eval mode with seeded random weights."""
    import torch
    import torchvision

    if name not in TORCHVISION_MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(TORCHVISION_MODELS)}")
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None).eval()
    # Some layers start at zero (vit's head, for one): an all-zero output would
    # make any comparison pass, so give them random values too.
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and not p.any():
                p.normal_(0.0, 0.02)
    return model


def _bert_classes():
    import torch
    from torch import nn

    class SelfAttention(nn.Module):
        def __init__(self, hidden: int, heads: int):
            super().__init__()
            self.heads, self.head_dim = heads, hidden // heads
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)

        def split(self, t):
            b, s, _ = t.shape
            return t.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

        def forward(self, x, mask):
            q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            probs = torch.softmax(scores + mask, dim=-1)
            ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
            b, s = ctx.shape[0], ctx.shape[1]
            return ctx.view(b, s, self.heads * self.head_dim)

    class Layer(nn.Module):
        def __init__(self, hidden: int, heads: int, intermediate: int):
            super().__init__()
            self.attention = SelfAttention(hidden, heads)
            self.attention_out = nn.Linear(hidden, hidden)
            self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.intermediate = nn.Linear(hidden, intermediate)
            self.output = nn.Linear(intermediate, hidden)
            self.output_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.dropout = nn.Dropout(0.1)

        def forward(self, x, mask):
            a = self.attention_norm(x + self.dropout(self.attention_out(self.attention(x, mask))))
            h = torch.nn.functional.gelu(self.intermediate(a))
            return self.output_norm(a + self.dropout(self.output(h)))

    class BertLike(nn.Module):
        """A BERT encoder written with explicit ops, the way Hugging Face's BERT traces."""

        def __init__(self, vocab: int, hidden: int, layers: int, heads: int, intermediate: int, max_positions: int):
            super().__init__()
            self.word = nn.Embedding(vocab, hidden)
            self.position = nn.Embedding(max_positions, hidden)
            self.token_type = nn.Embedding(2, hidden)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)
            self.dropout = nn.Dropout(0.1)
            self.layers = nn.ModuleList([Layer(hidden, heads, intermediate) for _ in range(layers)])
            self.pooler = nn.Linear(hidden, hidden)

        def forward(self, input_ids, attention_mask):
            seq = input_ids.shape[1]
            positions = torch.arange(seq, dtype=torch.long).unsqueeze(0)
            x = self.word(input_ids) + self.position(positions) + self.token_type(torch.zeros_like(input_ids))
            x = self.dropout(self.norm(x))
            mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
            for layer in self.layers:
                x = layer(x, mask)
            return x, torch.tanh(self.pooler(x[:, 0]))

    return BertLike


def bert_like(vocab: int = 30522, hidden: int = 768, layers: int = 12, heads: int = 12,
              intermediate: int | None = None, max_positions: int = 512, seed: int = 0):
    """BERT-base by default; smaller shapes for tests."""
    import torch

    torch.manual_seed(seed)
    model = _bert_classes()(vocab, hidden, layers, heads, intermediate or 4 * hidden, max_positions)
    return model.eval()


def bert_inputs(batch: int = 1, seq: int = 128, vocab: int = 30522, seed: int = 0):
    """(input_ids, attention_mask) as int64 tensors; the last quarter of each row is padding."""
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[:, seq - seq // 4:] = 0
    return ids, mask
