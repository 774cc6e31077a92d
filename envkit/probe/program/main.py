"""The probe's entry point: the arguments, the report every framework fills in, the framework imported under guard,
and the ONE JSON document on stdout (everything else the framework writes goes to stderr, and is kept)."""

import contextlib
import json
import os
import platform
import sys
import time
import warnings

from .collective import MULTI_GPU_TIMEOUT, STUCK
from .companions import check_companions
from .cross_node import cross_node_worker
from .frameworks import framework_for, installed_frameworks
from .jax_probe import probe_jax
from .mxnet_probe import probe_mxnet
from .record import Recorder, TeeText, clip, error_record, finite
from .tensorflow_probe import probe_tensorflow
from .torch_probe import nccl_worker, probe_torch

PROBE_FORMAT = 1
PROBES = {"torch": probe_torch, "tensorflow": probe_tensorflow, "jax": probe_jax, "mxnet": probe_mxnet}
# Environment variables that explain what a framework sees (passed through by envkit's runner).
ENVIRONMENT_KEYS = (
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH",
    "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
    "SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE",
)


def torch_version_file():
    """What torch/version.py says (its __version__ and cuda), read as text, for a torch that cannot be imported: a
    plain `pip install torch` names no CUDA in its version (PyPI's 2.15.0 is the CUDA 13.2 build), version.py does.
    None when it cannot be read."""
    import re
    try:
        from importlib.util import find_spec
        spec = find_spec("torch")
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        with open(os.path.join(locations[0], "version.py")) as handle:
            text = handle.read(65536)
    except Exception:
        return None
    facts = {}
    for key in ("__version__", "cuda"):
        # (a version's characters only: nothing a terminal would take as a control sequence)
        found = re.search(r"^%s(?:\s*:[^=\n]*)?\s*=\s*['\"]([A-Za-z0-9.+_-]{1,40})['\"]" % re.escape(key), text,
                          re.M)
        facts["version" if key == "__version__" else key] = found.group(1) if found else None
    return facts


def new_report(framework, options):
    return {
        "probe_format": PROBE_FORMAT,
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),  # the CPU this Python runs on: aarch64 on Grace, GB10 and Jetson
        "environment": dict((k, os.environ.get(k)) for k in ENVIRONMENT_KEYS),
        "requested": framework,
        "installed": [],
        "framework": None,
        "imported": False,
        "import_seconds": None,
        "import_error": None,
        "version": None,
        "gpu_build": None,
        "cuda": None,
        "cudnn": None,
        "gpu_available": None,
        "device_count": None,
        "arch_list": [],
        "cpu": {"checks": []},
        "devices": [],
        "multi_gpu": None,
        "bench": None,
        "errors": [],
        "warnings": [],
        "stderr": "",
        "probe_error": None,
        "options": options,
    }


def run(report, argv):
    recorder = Recorder(report)
    requested = report["requested"]
    report["installed"] = installed_frameworks()
    framework, why = framework_for(requested)
    if framework is None:
        if requested == "auto":
            report["import_error"] = {"where": "import", "type": "ModuleNotFoundError", "message": why,
                                      "traceback": ""}
        else:
            report["probe_error"] = {"where": "arguments", "type": "UsageError", "message": why, "traceback": ""}
        return
    report["framework"] = framework
    started = time.time()
    try:
        __import__(framework)
    except BaseException as exc:  # ImportError, but also SystemExit or a crash of an extension's init code
        report["import_error"] = error_record("import %s" % framework, exc)
        report["import_seconds"] = round(time.time() - started, 3)
        if isinstance(exc, KeyboardInterrupt):
            raise
        if framework == "torch":
            report["package"] = torch_version_file()
        return
    report["import_seconds"] = round(time.time() - started, 3)
    report["imported"] = True
    PROBES[framework](report, recorder, report["options"])
    asked = report["options"].get("companions") or []
    if asked and not report.get("companions"):  # a framework whose companions have no operation here: imported
        report["companions"] = check_companions(recorder, framework, asked, [], {})


def main(argv):
    if len(argv) >= 6 and argv[0] == "--nccl-worker":
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        result = nccl_worker(int(argv[1]), int(argv[2]), argv[3], int(argv[4]), int(argv[5]))
        out.write(json.dumps(result))
        out.flush()
        return 0
    if len(argv) >= 9 and argv[0] == "--cross-node-worker":
        # framework rank world addresses (every node's, comma-separated, the first node's first) port timeout bytes
        # iterations
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        result = cross_node_worker(argv[1], int(argv[2]), int(argv[3]), argv[4].split(","), int(argv[5]),
                                   float(argv[6]), int(argv[7]), int(argv[8]))
        out.write(json.dumps(_json_safe(result)))
        out.flush()
        return 0
    # Anything the framework writes to stdout (C code included) goes to stderr: stdout is for the JSON alone.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    requested = argv[0] if argv else "auto"
    options = {"multi_gpu": "--multi-gpu" in argv[1:], "bench": "--bench" in argv[1:],
               "multi_gpu_timeout": MULTI_GPU_TIMEOUT, "companions": []}
    for arg in argv[1:]:
        if arg.startswith("--companions="):  # the companions the build installs, each checked
            options["companions"] = [name for name in arg.partition("=")[2].split(",") if name]
        if arg.startswith("--multi-gpu-timeout="):
            try:
                options["multi_gpu_timeout"] = max(1.0, float(arg.partition("=")[2]))
            except ValueError:
                pass
    report = new_report(requested, options)
    tee = TeeText(sys.stderr)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with contextlib.redirect_stderr(tee):
                try:
                    run(report, argv)
                except BaseException as exc:  # the probe's own bug, or an exit from inside a framework
                    report["probe_error"] = error_record("probe", exc)
        report["warnings"] = [
            {"category": w.category.__name__, "message": clip(w.message), "source": "%s:%s" % (w.filename, w.lineno)}
            for w in caught
        ]
    except BaseException as exc:
        report["probe_error"] = error_record("probe", exc)
    report["stderr"] = tee.text()
    out.write(json.dumps(_json_safe(report), sort_keys=True))
    out.write("\n")
    out.flush()
    if STUCK:  # a collective still hangs in its thread: do not wait for it (or for the framework's teardown)
        sys.stderr.flush()
        os._exit(0)
    return 0


def _json_safe(value):
    """Plain JSON: no NaN or infinity (strict parsers reject them), no objects a framework slipped in."""
    if isinstance(value, dict):
        return dict((str(k), _json_safe(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float):
        return value if finite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)

