"""The benchmark's models: name -> (eager model, example inputs).

Each builder is deterministic (seeded), so every runner process builds the
same weights; the inputs are written once by the driver and read by all.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

DEFAULT = ("resnet50", "resnet18", "mobilenet_v2", "efficientnet_b0", "densenet121", "regnet_y_800mf", "convnext_tiny",
           "vit_b_16", "swin_t", "bert", "gpt_einsum", "wav2vec2_base", "tiny")
QUICK = ("resnet18", "tiny")
# The models the coverage work made run (llga.zoo.COVERAGE_MODELS, except the
# scripted-only WaveRNN: the harness traces): make bench-coverage.
COVERAGE = ("wav2vec2_base", "conformer", "convtasnet", "deepspeech", "emformer", "lstm_tagger", "gru_encoder",
            "transformer_causal", "gpt_einsum")


def _torchvision(name: str, batch: int):
    import torch

    from llga import zoo

    model = zoo.torchvision_model(name)
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    return model, (x,)


def _bert(batch: int):
    from llga import zoo

    return zoo.bert_like(), zoo.bert_inputs(batch=batch, seq=128)


def _tiny(batch: int):
    """One nn.Linear(28, 64) on a 32x28 input: per-call overhead. `batch`
    multiplies the 32 rows."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(28, 64).eval()
    return model, (torch.randn(32 * batch, 28, generator=torch.Generator().manual_seed(1)),)


BUILDERS: Dict[str, Callable[[int], Tuple[object, tuple]]] = {
    "bert": _bert,
    "tiny": _tiny,
}
for _name in ("resnet50", "resnet18", "mobilenet_v2", "efficientnet_b0", "densenet121", "regnet_y_800mf", "convnext_tiny",
              "vit_b_16", "swin_t"):
    BUILDERS[_name] = (lambda n: (lambda batch: _torchvision(n, batch)))(_name)


def _coverage(name: str, batch: int):
    from llga import zoo

    return zoo.coverage_model(name, batch)


for _name in COVERAGE:
    BUILDERS[_name] = (lambda n: (lambda batch: _coverage(n, batch)))(_name)

DESCRIPTIONS = {
    "bert": "BERT-base encoder, seq 128, explicit ops",
    "tiny": "nn.Linear(28, 64) on 32x28",
    "wav2vec2_base": "torchaudio wav2vec2_base, 0.5 s of audio",
    "conformer": "torchaudio Conformer, 2 layers, 50 frames",
    "convtasnet": "torchaudio ConvTasNet (small), 0.5 s",
    "deepspeech": "torchaudio DeepSpeech, 50 frames",
    "emformer": "torchaudio Emformer, 2 layers",
    "lstm_tagger": "embedding + 2-layer biLSTM tagger, 32 tokens",
    "gru_encoder": "embedding + 2-layer biGRU encoder, 20 tokens",
    "transformer_causal": "nn.Transformer 2+2 layers, causal tgt_mask",
    "gpt_einsum": "GPT-2-style decoder (einsum, tril mask), 32 tokens",
}


def build(name: str, batch: int):
    if name not in BUILDERS:
        raise SystemExit(f"unknown model {name!r}; known: {', '.join(BUILDERS)}")
    return BUILDERS[name](batch)
