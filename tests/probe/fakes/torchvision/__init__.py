"""Stand-in for torchvision beside the torch stand-in, or beside the real torch (see fakearray.py). Switches, under
"torchvision" in fake_config.json (where there is none, the defaults):

version, broken (built for another torch: importing it fails as the real one does, with "operator torchvision::nms
does not exist"). ops.nms keeps boxes as the real one does (greedy, by decreasing score); on a GPU that the torch
stand-in's wrong_results names, it gives wrong indices.
"""

import types

import torch

try:
    import fakearray  # the stand-ins' switches: absent beside the real torch
except ImportError:
    fakearray = None

_cfg = fakearray.config("torchvision") if fakearray is not None and fakearray.configured() else {}
if _cfg.get("broken"):
    # What torchvision/_meta_registrations.py raises when its C++ operators did not load (another torch's ABI).
    raise RuntimeError("operator torchvision::nms does not exist")

__version__ = _cfg.get("version", "0.20.1")


def _iou(a, b):
    width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _nms(boxes, scores, iou_threshold):
    corners, score = boxes.tolist(), scores.tolist()
    kept = []
    for index in sorted(range(len(corners)), key=lambda i: -score[i]):
        if all(_iou(corners[index], corners[other]) <= iou_threshold for other in kept):
            kept.append(index)
    effects = getattr(torch, "_gpu_effects", None)  # the stand-in's wrong results on a failing GPU
    return torch.tensor(effects(boxes, kept) if effects else kept, device=boxes.device)


ops = types.SimpleNamespace(nms=_nms)
