"""The companions a framework's build installs beside it (torchvision and torchaudio beside torch): each imported,
and one small real operation of each run on the CPU and on every GPU the framework checked, compared with a
reference. A companion built for another version of the framework fails here ("operator torchvision::nms does not
exist" on import), where the framework's own check passes.

Which companions: those envkit names (--companions=NAME,NAME: the ones the build installs) and the ones this module
knows that are installed. A companion named and not installed is an error of its own."""

import math

from .checks import run_check
from .record import error_record

KNOWN = {"torch": ("torchvision", "torchaudio")}  # the companions that have an operation below

# torchvision.ops.nms: four boxes, the second and the fourth overlapping the first (IoU 0.68 and 0.95), the third
# apart; at IoU 0.5, boxes 0 and 2 are kept.
NMS_BOXES = [[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [20.0, 20.0, 30.0, 30.0], [0.0, 0.0, 10.0, 10.5]]
NMS_SCORES = [0.9, 0.8, 0.7, 0.6]
NMS_IOU = 0.5
# torchaudio.transforms.Spectrogram: a sine of 4 cycles per 16 samples, framed by 16 (hop 8, no padding), compared
# with the same power spectrogram computed here (7 frames of 9 frequencies).
FFT = 16
HOP = 8
WAVE = [[math.sin(2.0 * math.pi * 4 * n / FFT) for n in range(64)]]


def companion_version(name):
    try:
        from importlib import metadata  # Python 3.8+
        return metadata.version(name)
    except Exception:
        try:
            import pkg_resources
            return pkg_resources.get_distribution(name).version
        except Exception:
            return None


def installed(name):
    try:
        from importlib.util import find_spec
        return find_spec(name) is not None
    except Exception:
        return True  # a broken package is still installed: importing it says how it is broken


def check_companions(recorder, framework, asked, devices, operations):
    """One entry per companion: name, version, whether envkit asked for it (the build installs it), imported, the
    import's error, and its checks on ``devices`` (``operations``: name -> (operation name, compute(module,
    device), reference())): never raises."""
    names = list(asked) + [name for name in KNOWN.get(framework, ()) if name not in asked and installed(name)]
    out = []
    for name in names:
        entry = {"name": name, "version": companion_version(name), "asked": name in asked, "imported": False,
                 "error": None, "checks": []}
        out.append(entry)
        try:
            module = __import__(name)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # ImportError, RuntimeError ("operator torchvision::nms does not exist"), ...
            entry["error"] = error_record("import %s" % name, exc)
            continue
        entry["imported"] = True
        if name not in operations:
            continue
        operation, compute, reference = operations[name]
        for device in devices:
            entry["checks"].append(run_check(recorder, operation, device, lambda: compute(module, device),
                                             reference))
    return out


def torch_operations(torch):
    """torchvision's ops.nms (the boxes kept) and torchaudio's Spectrogram (a power spectrogram), for
    check_companions: on every device, compared with the pure-Python answer."""
    def tensor(values, device):
        return torch.tensor(values, dtype=torch.float32).to(device)

    def nms(torchvision, device):
        kept = torchvision.ops.nms(tensor(NMS_BOXES, device), tensor(NMS_SCORES, device), NMS_IOU)
        return [float(index) for index in kept.cpu().tolist()]

    def spectrogram(torchaudio, device):
        transform = torchaudio.transforms.Spectrogram(n_fft=FFT, hop_length=HOP, center=False, power=2.0)
        return transform.to(device)(tensor(WAVE, device)).cpu().tolist()

    return {
        "torchvision": ("ops.nms", nms, lambda: [float(index) for index in py_nms(NMS_BOXES, NMS_SCORES, NMS_IOU)]),
        "torchaudio": ("transforms.Spectrogram", spectrogram, lambda: py_spectrogram(WAVE, FFT, HOP)),
    }


def py_spectrogram(wave, n_fft, hop):
    """The power spectrogram torchaudio.transforms.Spectrogram(n_fft, hop, center=False, power=2) computes: a
    periodic Hann window, one-sided, [channel][frequency][frame]."""
    import cmath

    window = [0.5 - 0.5 * math.cos(2.0 * math.pi * k / n_fft) for k in range(n_fft)]
    out = []
    for channel in wave:
        frames = [[channel[start + k] * window[k] for k in range(n_fft)]
                  for start in range(0, len(channel) - n_fft + 1, hop)]
        out.append([[abs(sum(frame[k] * cmath.exp(-2j * math.pi * b * k / n_fft) for k in range(n_fft))) ** 2
                     for frame in frames] for b in range(n_fft // 2 + 1)])
    return out


def py_nms(boxes, scores, threshold):
    """Greedy non-maximum suppression, as torchvision.ops.nms: indices kept, by decreasing score."""
    order = sorted(range(len(boxes)), key=lambda i: -scores[i])
    kept = []
    for index in order:
        if all(_iou(boxes[index], boxes[other]) <= threshold for other in kept):
            kept.append(index)
    return kept


def _iou(a, b):
    width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0
