"""Audio front ends: torch.stft read through its magnitude (torchaudio's
Spectrogram, MelSpectrogram, MFCC) runs as one strided conv1d of DFT kernels,
since llga has no complex tensors; a complex result read any other way is
refused by name, never answered wrongly."""

import numpy as np
import pytest
import torch

import llga

torchaudio = pytest.importorskip("torchaudio")
T = torchaudio.transforms


def _close(got, want, what):
    got, want = np.asarray(got), want.detach().numpy()
    assert got.shape == want.shape, what
    scale = max(1.0, float(np.abs(want).max()))
    assert np.abs(got - want).max() <= 2e-5 * scale, f"{what}: {np.abs(got - want).max()} off (scale {scale})"


FRONT_ENDS = {
    "mel": (lambda: T.MelSpectrogram(sample_rate=16000, n_fft=400, hop_length=160, n_mels=64), (2, 4000)),
    "mfcc": (lambda: T.MFCC(sample_rate=16000, n_mfcc=13, melkwargs=dict(n_fft=256, hop_length=128, n_mels=40)),
             (3, 3000)),
    # one signal, a window shorter than the frame, magnitude normalized by the window
    "magnitude": (lambda: T.Spectrogram(n_fft=256, win_length=200, hop_length=64, power=1.0, normalized=True),
                  (4000,)),
    # no centre padding, both sides of the spectrum
    "two-sided": (lambda: T.Spectrogram(n_fft=128, hop_length=32, center=False, onesided=False), (2, 1000)),
    # FFT radices 3 and 7 (441 = 3 3 7 7) and 2, 3, 5 with a hop that does not divide it
    "odd radices": (lambda: T.Spectrogram(n_fft=441, hop_length=100, power=1.0), (3, 5000)),
    "radix 2 3 5": (lambda: T.Spectrogram(n_fft=30, hop_length=7, normalized=True, onesided=False), (1, 517)),
    # a prime factor above 31 (74 = 2 37): the DFT as one convolution instead
    "prime 37": (lambda: T.Spectrogram(n_fft=74, hop_length=20), (2, 900)),
}

_CONV = {"prime 37"}


@pytest.mark.parametrize("name", sorted(FRONT_ENDS))
def test_front_ends_match_torchaudio_at_other_lengths_too(name):
    make, shape = FRONT_ENDS[name]
    m = make().eval()
    x = torch.randn(*shape)
    c = llga.optimize(torch.jit.trace(m, x), [x.numpy()])
    counts = c.graph.node_counts()
    assert "aten::stft" not in counts
    notes = [n for r in c.passes if r.name == "decompose" for n in r.notes if "stft" in n]
    if name in _CONV:
        assert any(p.ops[0] == "aten::conv1d" for p in c.partitions)  # the DFT as oneDNN's convolution
        assert notes and "DFT kernels" in notes[0] and "llga::dft_frames" not in counts
    else:
        assert counts.get("llga::dft_frames") == 1 and notes and "an FFT of" in notes[0]
    for length in (shape[-1], shape[-1] + 333):  # another length: another number of frames
        y = torch.randn(*shape[:-1], length)
        _close(c(y.numpy()), m(y), f"{name} at {length} samples")


class _Phase(torch.nn.Module):
    def forward(self, x):
        return torch.angle(torch.stft(x, 64, 16, window=torch.hann_window(64), return_complex=True))


def test_a_complex_stft_read_other_than_as_a_magnitude_is_refused_by_name():
    x = torch.randn(1, 1000)
    with pytest.raises(llga.UnsupportedOpError, match="aten::stft") as e:
        llga.optimize(torch.jit.trace(_Phase(), x))
    assert "aten::angle" in str(e.value)  # and the complex op reading it


@pytest.mark.parametrize("name", ["mel", "mfcc", "magnitude"])
def test_scripted_front_ends_without_examples(name):
    # a scripted transform's graph knows neither the signal's rank nor its dtype:
    # the stft still becomes the FFT, shaped by the call's input at run time
    make, shape = FRONT_ENDS[name]
    m = make().eval()
    c = llga.optimize(torch.jit.script(m))
    assert "aten::stft" not in c.graph.node_counts()
    for x in (torch.randn(*shape), torch.randn(shape[-1] + 100), torch.randn(2, 2, 900)):  # 1-D and batched signals
        _close(c(x.numpy()), m(x), f"scripted {name}, input {tuple(x.shape)}")


def _stft_magnitude(x: torch.Tensor):
    return torch.stft(x, 64, 16, window=torch.hann_window(64), return_complex=True).abs()


def test_scripted_stft_checks_the_rank_at_run_time():
    c = llga.optimize(torch.jit.script(_stft_magnitude))
    for x in (torch.randn(500), torch.randn(3, 500)):
        _close(c(x.numpy()), _stft_magnitude(x), f"input {tuple(x.shape)}")
    with pytest.raises(llga.ExecutionError, match="stft: expected a 1D or 2D tensor"):  # as PyTorch refuses it
        c(np.zeros((2, 2, 500), np.float32))
