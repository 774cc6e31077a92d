"""Stand-in for torchaudio beside the torch stand-in, or beside the real torch (see fakearray.py). Switches, under
"torchaudio" in fake_config.json (where there is none, the defaults):

version, broken (importing it fails as torchaudio built for another torch does: its library's undefined symbol).
transforms.Spectrogram computes a power spectrogram (a periodic Hann window, no padding) by a plain DFT; on a GPU
that the torch stand-in's wrong_results names, its values are wrong.
"""

import cmath
import math
import types

import torch

try:
    import fakearray  # the stand-ins' switches: absent beside the real torch
except ImportError:
    fakearray = None

_cfg = fakearray.config("torchaudio") if fakearray is not None and fakearray.configured() else {}
if _cfg.get("broken"):
    raise OSError("/env/lib/python3.11/site-packages/torchaudio/lib/libtorchaudio.so: undefined symbol: "
                  "_ZNK3c1010TensorImpl36is_contiguous_nondefault_policy_implENS_12MemoryFormatE")

__version__ = _cfg.get("version", "2.5.1")


class Spectrogram(object):
    def __init__(self, n_fft=400, hop_length=None, center=True, power=2.0):
        if center:
            raise NotImplementedError("the stand-in computes center=False only")
        self.n_fft, self.hop, self.power = n_fft, hop_length or n_fft // 2, power

    def to(self, device):
        return self

    def __call__(self, wave):
        n = self.n_fft
        window = [0.5 - 0.5 * math.cos(2.0 * math.pi * k / n) for k in range(n)]
        out = []
        for channel in wave.tolist():
            starts = range(0, len(channel) - n + 1, self.hop)
            frames = [[channel[s + k] * window[k] for k in range(n)] for s in starts]
            out.append([[abs(sum(frame[k] * cmath.exp(-2j * math.pi * b * k / n) for k in range(n))) ** self.power
                         for frame in frames] for b in range(n // 2 + 1)])
        effects = getattr(torch, "_gpu_effects", None)  # the stand-in's wrong results on a failing GPU
        return torch.tensor(effects(wave, out) if effects else out, device=wave.device)


transforms = types.SimpleNamespace(Spectrogram=Spectrogram)
