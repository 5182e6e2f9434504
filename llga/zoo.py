"""Models used by llga's tests, benchmarks, demo and notebooks.

Needs PyTorch (imported lazily). Weights are random: torchvision ships no
pretrained weights here, and none are needed to compare two runtimes.
"""

from __future__ import annotations

import math

TORCHVISION_MODELS = (
    "alexnet", "vgg11_bn", "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "densenet121",
    "squeezenet1_0", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "shufflenet_v2_x1_0",
    "regnet_y_400mf", "regnet_y_800mf", "convnext_tiny", "vit_b_16", "swin_t",
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


# ------------------------------------------------------------------ coverage models
#
# Models from outside the vision corpus that the coverage work made run:
# torchaudio's models (random weights), recurrent taggers and encoders, and
# transformer decoders. Each builder takes a batch size and returns (model in
# eval mode, example inputs); sizes are modest so tests stay quick.

COVERAGE_MODELS = ("wav2vec2_base", "conformer", "convtasnet", "deepspeech", "emformer", "wavernn", "lstm_tagger",
                   "gru_encoder", "transformer_causal", "gpt_einsum")
# Built for scripting (its forward cannot be traced in PyTorch 1.13: tracing
# compiles its exported infer(), whose GRU call fails); the others trace.
SCRIPTED_ONLY = ("wavernn",)


def _seeded(seed: int = 0):
    import torch

    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 1)


def _wav2vec2_base(batch: int):
    import torch
    import torchaudio

    class Features(torch.nn.Module):
        """wav2vec2's features only (its forward also returns the lengths, None here)."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, waveform):
            return self.model(waveform)[0]

    g = _seeded()
    model = torchaudio.models.wav2vec2_base().eval()
    for m in model.modules():  # weight norm off before tracing, as deployment does
        if hasattr(m, "weight_g"):
            torch.nn.utils.remove_weight_norm(m)
    return Features(model).eval(), (torch.randn(batch, 8000, generator=g),)


def _conformer(batch: int):
    import torch
    import torchaudio

    g = _seeded()
    model = torchaudio.models.Conformer(input_dim=80, num_heads=4, ffn_dim=128, num_layers=2,
                                        depthwise_conv_kernel_size=31).eval()
    lengths = torch.full((batch,), 50, dtype=torch.long)
    lengths[1::2] = 40  # padded rows: the key padding mask matters
    return model, (torch.randn(batch, 50, 80, generator=g), lengths)


def _convtasnet(batch: int):
    import torch
    import torchaudio

    g = _seeded()
    model = torchaudio.models.ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=64, msk_kernel_size=3,
                                         msk_num_feats=32, msk_num_hidden_feats=64, msk_num_layers=4,
                                         msk_num_stacks=2).eval()
    return model, (torch.randn(batch, 1, 8000, generator=g),)


def _deepspeech(batch: int):
    import torch
    import torchaudio

    g = _seeded()
    return torchaudio.models.DeepSpeech(n_feature=40, n_hidden=128, n_class=29).eval(), (
        torch.randn(batch, 1, 50, 40, generator=g),)


def _emformer(batch: int):
    import torch
    import torchaudio

    g = _seeded()
    model = torchaudio.models.Emformer(input_dim=64, num_heads=4, ffn_dim=128, num_layers=2, segment_length=4,
                                       right_context_length=1).eval()
    lengths = torch.full((batch,), 21, dtype=torch.long)
    lengths[1::2] = 18
    return model, (torch.randn(batch, 21, 64, generator=g), lengths)


def _wavernn(batch: int):
    import torch
    import torchaudio

    g = _seeded()
    model = torchaudio.models.WaveRNN(upsample_scales=[5, 5, 8], n_classes=256, hop_length=200, n_res_block=2,
                                      n_rnn=64, n_fc=64, kernel_size=5, n_freq=40, n_hidden=32, n_output=32).eval()
    return model, (torch.randn(batch, 1, 200 * 6, generator=g), torch.randn(batch, 1, 40, 10, generator=g))


def _lstm_tagger(batch: int):
    import torch

    class Tagger(torch.nn.Module):
        """Embedding -> 2-layer bidirectional LSTM -> per-token tag scores."""

        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(1000, 64)
            self.lstm = torch.nn.LSTM(64, 128, 2, batch_first=True, bidirectional=True)
            self.out = torch.nn.Linear(256, 17)

        def forward(self, tokens):
            return self.out(self.lstm(self.embed(tokens))[0]).log_softmax(-1)

    g = _seeded()
    return Tagger().eval(), (torch.randint(0, 1000, (batch, 32), generator=g),)


def _gru_encoder(batch: int):
    import torch

    class Encoder(torch.nn.Module):
        """A seq2seq encoder: embedding -> 2-layer bidirectional GRU (time-major) -> outputs, final states."""

        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(1000, 64)
            self.gru = torch.nn.GRU(64, 128, 2, bidirectional=True)

        def forward(self, tokens):
            return self.gru(self.embed(tokens))

    g = _seeded()
    return Encoder().eval(), (torch.randint(0, 1000, (20, batch), generator=g),)


def _transformer_causal(batch: int):
    import torch

    class Seq2Seq(torch.nn.Module):
        """nn.Transformer with a causal target mask."""

        def __init__(self):
            super().__init__()
            self.transformer = torch.nn.Transformer(64, 4, 2, 2, 128, batch_first=True)

        def forward(self, src, tgt):
            mask = torch.nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
            return self.transformer(src, tgt, tgt_mask=mask)

    g = _seeded()
    return Seq2Seq().eval(), (torch.randn(batch, 12, 64, generator=g), torch.randn(batch, 10, 64, generator=g))


def _gpt_einsum(batch: int):
    import torch

    class GPT(torch.nn.Module):
        """A GPT-2-style decoder written with einsum and tril (causal mask), pre-norm blocks, gelu MLP."""

        def __init__(self, d=128, heads=4, layers=2, vocab=500, ctx=64):
            super().__init__()
            self.heads = heads
            self.wte = torch.nn.Embedding(vocab, d)
            self.wpe = torch.nn.Embedding(ctx, d)
            self.blocks = torch.nn.ModuleList([torch.nn.ModuleDict(dict(
                ln1=torch.nn.LayerNorm(d), qkv=torch.nn.Linear(d, 3 * d), proj=torch.nn.Linear(d, d),
                ln2=torch.nn.LayerNorm(d), fc=torch.nn.Linear(d, 4 * d), out=torch.nn.Linear(4 * d, d)))
                for _ in range(layers)])
            self.lnf = torch.nn.LayerNorm(d)
            self.head = torch.nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            B, T = idx.shape
            x = self.wte(idx) + self.wpe(torch.arange(T))
            causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
            for b in self.blocks:
                q, k, v = b["qkv"](b["ln1"](x)).chunk(3, -1)
                q, k, v = [t.view(B, T, self.heads, -1) for t in (q, k, v)]
                att = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.size(-1))
                att = att.masked_fill(~causal, float("-inf")).softmax(-1)
                y = torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(B, T, -1)
                x = x + b["proj"](y)
                x = x + b["out"](torch.nn.functional.gelu(b["fc"](b["ln2"](x))))
            return self.head(self.lnf(x))

    g = _seeded()
    return GPT().eval(), (torch.randint(0, 500, (batch, 32), generator=g),)


_COVERAGE_BUILDERS = {
    "wav2vec2_base": _wav2vec2_base, "conformer": _conformer, "convtasnet": _convtasnet, "deepspeech": _deepspeech,
    "emformer": _emformer, "wavernn": _wavernn, "lstm_tagger": _lstm_tagger, "gru_encoder": _gru_encoder,
    "transformer_causal": _transformer_causal, "gpt_einsum": _gpt_einsum,
}


def coverage_model(name: str, batch: int = 1):
    """(model in eval mode with seeded random weights, example inputs) for a COVERAGE_MODELS name."""
    if name not in _COVERAGE_BUILDERS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(COVERAGE_MODELS)}")
    return _COVERAGE_BUILDERS[name](batch)


# ---- every model torchvision lists, by task (issue: all of torchvision runs)

TORCHVISION_TASKS = ("classification", "quantization", "segmentation", "detection", "video", "optical_flow")


def torchvision_catalog() -> dict:
    """{name: task} for every model ``torchvision.models.list_models()`` lists,
    quantizable models under their ``quantized_`` names."""
    import torchvision.models as tvm

    mods = {"classification": tvm, "quantization": tvm.quantization, "segmentation": tvm.segmentation,
            "detection": tvm.detection, "video": tvm.video, "optical_flow": tvm.optical_flow}
    return {name: task for task, mod in mods.items() for name in tvm.list_models(mod)}


def torchvision_example(name: str, task: str, batch: int = 1):
    """Example inputs of the smallest size every model of the task accepts
    (vit/swin/maxvit and mvit need their native resolution)."""
    import torch

    g = torch.Generator().manual_seed(batch)
    if task == "detection":  # a list of images of different sizes, as detection takes them
        return ([torch.rand(3, 160, 192, generator=g) for _ in range(batch)],)
    if task == "video":
        size, frames = (224, 16) if name.startswith(("mvit", "s3d")) else (112, 8)
        return (torch.randn(batch, 3, frames, size, size, generator=g),)
    if task == "optical_flow":
        return (torch.randn(batch, 3, 128, 160, generator=g), torch.randn(batch, 3, 128, 160, generator=g))
    if task == "segmentation":
        return (torch.randn(batch, 3, 96, 128, generator=g),)
    native = name.startswith(("vit_", "swin", "maxvit"))
    size = 299 if "inception" in name else 224 if native else 128
    return (torch.randn(batch, 3, size, size, generator=g),)


def torchvision_any(name: str, seed: int = 0):
    """(model in eval mode with seeded random weights, example inputs, task)
    for any model of :func:`torchvision_catalog`. No weights are downloaded:
    backbones are random too; quantizable models are built in float form;
    parameters that start at zero get random values (see torchvision_model)."""
    import torch
    import torchvision.models as tvm

    catalog = torchvision_catalog()
    if name not in catalog:
        raise ValueError(f"unknown torchvision model {name!r}")
    task = catalog[name]
    kw = {"weights": None}
    if task in ("segmentation", "detection"):
        kw["weights_backbone"] = None
    if task == "quantization":
        kw["quantize"] = False
    if name.endswith(("googlenet", "inception_v3")):
        kw.update(aux_logits=True, init_weights=False)
    torch.manual_seed(seed)
    model = tvm.get_model_builder(name)(**kw).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and not p.any():
                p.normal_(0.0, 0.02)
    return model, torchvision_example(name, task), task
