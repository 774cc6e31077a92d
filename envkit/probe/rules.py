"""The diagnosis rules: every known failure with its cause and the next step to take.

The table RULES: each rule has an id, a cause and an advice template, and a matcher (envkit.probe.matchers) that
reads the facts (the probe's fields, the error texts it captured, the machine) and returns the values for the
templates, once per thing it found. Most matchers are a few regular expressions, but some compare facts (a GPU's
capability with the build's arch list), so the table lives here rather than in envs/. A rule's ``unless`` names
rules that, when they fired, already explain what it would. envkit.probe.diagnose applies the table, in order, and
assembles the report.
"""

from __future__ import annotations

from dataclasses import dataclass

from envkit.probe import matchers as m, platform_matchers as pm
from envkit.probe.matchers import Matcher


@dataclass(frozen=True)
class Rule:
    id: str
    cause: str
    advice: str
    match: Matcher
    failed: bool = True
    unless: tuple[str, ...] = ()  # rules that, when they fired, already explain what this one would
    # The fault lies outside the build (a variable, the job, the GPU's state or hardware): another build is no cure,
    # and a report whose failures are all of this kind advises none.
    outside_the_build: bool = False



# --- the table -----------------------------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    Rule("probe-timed-out", "the check did not finish within {timeout} s and was stopped",
         "{suspect} If the machine is only slow (the first start of a build compiles its PTX), rerun with "
         "--probe-timeout {longer}.", m.timed_out),
    Rule("python-too-old", "{python} cannot run the check: it needs Python 3.6 or newer",
         "Check an environment with Python 3.6 or newer ({another_env}); {create}", m.old_python),
    Rule("probe-no-report", "the check {what}; the last thing it wrote on stderr: {tail}",
         "Run `{python} -V` to see whether it starts, and check that {python} is a working Python 3.6 or newer.",
         m.no_report, unless=("python-too-old",)),
    Rule("probe-crashed", "the check stopped early: {error}",
         "This is a bug in envkit's probe or a framework that exits on import: rerun with --debug and report it.",
         m.probe_error),
    Rule("no-framework", "none of torch, tensorflow, jax or mxnet is installed for {python}",
         "Check the environment that has one ({another_env}); {create}", m.no_framework),
    Rule("numpy2", "{subject} was built against NumPy 1.x, and this environment has NumPy 2: it {effect}",
         "Install NumPy 1 into it: `{python} -m pip install 'numpy<2'`; or move to a newer build: {create}", m.numpy2),
    Rule("import-missing", "{framework} is not installed for {python}",
         "Check the environment that has it ({another_env}); {create}", m.import_missing,
         unless=("numpy2",)),
    Rule("missing-library", "{framework} cannot load {library}: {why}", "{what}; {create}", m.missing_library,
         unless=("numpy2",)),
    Rule("import-failed", "{framework} cannot be imported: {error}",
         "Run `{python} -c 'import {framework}'` to see the whole error; reinstalling into a fresh environment "
         "usually cures it: {create}", m.import_failed, unless=("numpy2", "import-missing", "missing-library")),
    Rule("driver-too-old", "the NVIDIA driver is too old for this build: it supports {have}, the build needs {need}",
         "Use a build that runs on this driver: {create}{update}", m.driver_too_old),
    Rule("cpu-wheel-on-aarch64", "{subject} is a CPU-only build ({evidence}), what {where} gives on aarch64: it "
         "cannot use {gpus}", "{instead} {create}", pm.cpu_wheel_on_aarch64),
    Rule("kfd-access", "this user cannot open /dev/kfd, the AMD GPUs' compute device ({why}): ROCm sees no GPU",
         "Ask the machine's admin to add you to the group that owns /dev/kfd and /dev/dri/renderD* (`ls -l /dev/kfd` "
         "shows it: usually `render`, on older systems `video`), then log in again; a ROCm build needs no other "
         "change.", pm.kfd_access, outside_the_build=True),
    Rule("cpu-build", "{subject} is a CPU-only build ({evidence}): it cannot use {gpus}",
         "Install a GPU build: {create}", m.cpu_build, unless=("cpu-wheel-on-aarch64",)),
    Rule("generic-cuda-on-jetson", "{subject} is a generic aarch64 CUDA build{evidence}: its CUDA libraries are for "
         "server ARM (Grace, GB10), not for this Jetson's integrated GPU under {jetpack}",
         "Install a build made for Jetson (from NVIDIA's or the Jetson AI Lab's index for this JetPack): {create}",
         pm.generic_cuda_on_jetson),
    Rule("no-kernels", "this build has no kernels for {gpu}: it carries {carries}",
         "Use a build that has them: {create}", m.no_kernels, unless=("driver-too-old",)),
    Rule("slurm-no-gpu", "this Slurm job ({job}) has no GPU: {framework} sees none",
         "Ask Slurm for GPUs: `srun --gpus-per-node=1 ...`, or `#SBATCH --gres=gpu:1` in the batch script (on a login "
         "node, run the check inside such a job).", m.slurm_no_gpu, unless=("driver-too-old", "no-kernels"),
         outside_the_build=True),
    Rule("gpus-hidden", "CUDA_VISIBLE_DEVICES={value!r} hides the GPUs: {framework} sees none",
         "Unset CUDA_VISIBLE_DEVICES, or set it to the GPUs to use (e.g. CUDA_VISIBLE_DEVICES=0,1).", m.gpus_hidden,
         unless=("driver-too-old", "slurm-no-gpu"), outside_the_build=True),
    Rule("gpus-partly-hidden", "CUDA_VISIBLE_DEVICES={value!r} shows {framework} {seen} of this machine's {total}",
         "Only those were checked; unset CUDA_VISIBLE_DEVICES to check them all.", m.gpus_partly_hidden, failed=False),
    Rule("no-gpu-here", "this {framework} build needs {vendor}, and this machine has none that works",
         "Run the check on a GPU node, or judge this environment for one from here with --machine FILE (`envkit "
         "detect --json` saved there). For CPU work here: {create}", m.no_gpu_here,
         unless=("driver-too-old", "kfd-access", "slurm-no-gpu", "gpus-hidden")),
    Rule("gpus-not-seen", "{framework} sees {seen} of this machine's {total}.{error}",
         "Look at `nvidia-smi`: a GPU in an error state, in MIG mode or in exclusive use by another process is not "
         "offered to new processes.", m.gpus_not_seen,
         unless=("driver-too-old", "kfd-access", "no-kernels", "slurm-no-gpu", "gpus-hidden", "no-gpu-here"),
         outside_the_build=True),
    Rule("gpu-out-of-memory", "{where} ran out of memory during {check}: {error}",
         "Other processes hold its memory: see `nvidia-smi`, and rerun when it is free.",
         m.check_errors(m.OUT_OF_MEMORY), outside_the_build=True),
    Rule("gpu-busy", "{where} is busy or unavailable: {error}",
         "It is in exclusive compute mode and in use, or prohibited: see `nvidia-smi -q -d COMPUTE` and its processes.",
         m.check_errors(m.BUSY), outside_the_build=True),
    Rule("wrong-results", "{where} computed {check} wrongly: {problem}",
         "The build runs but computes wrong numbers: look for ECC or Xid errors (`nvidia-smi -q -d ECC`, `dmesg`), "
         "try another GPU with CUDA_VISIBLE_DEVICES, and tell the machine's admin.", m.wrong_results,
         outside_the_build=True),
    Rule("computation-failed", "{check} failed on {where}: {error}",
         "Run the same computation by hand to see the whole error; the captured tracebacks are in --json.",
         m.computation_failed),
    Rule("companion-missing", "{companion} is not installed, and the build installs it ({pin})",
         "Make the environment again, with the build's own {companion}: {create}", m.companion_missing),
    Rule("companion-broken", "{companion} {version} does not work with {subject}: {what}",
         "A {companion} built for another {framework} fails like this{pin}. Make the environment again, so that the "
         "two are a pair: {create}", m.companion_broken),
    Rule("does-not-fit", "{build} does not run on {machine}: {reasons}", "Use a build that does: {create}",
         m.does_not_fit),
    Rule("gpus-not-checked-here", "no GPU computation ran: the check ran on this machine, not on {machine}",
         "Run `{doctor}` on that machine (a node of a Slurm partition: in a job there) to check its GPUs for real.",
         m.not_checked_here, failed=False),
    Rule("build-not-in-manifest", "the installed {subject} is not a build of the {manifest} manifest",
         "It was judged by what it reports about itself only.", m.not_identified, failed=False),
    Rule("multi-gpu-failed", "the {method} across {n} GPUs failed: {error}",
         "Rerun with NCCL_DEBUG=INFO set to see where NCCL stops (torch's all-reduce, JAX's psum and TensorFlow's "
         "NcclAllReduce run on NCCL); NCCL_P2P_DISABLE=1 tells whether peer-to-peer transfers are the problem.",
         m.multi_gpu_failed, outside_the_build=True),
    Rule("multi-gpu-skipped", "--multi-gpu: {why}", "The rest of the check is complete without it.",
         m.multi_gpu_skipped, failed=False),
    Rule("bench-failed", "the benchmark failed on GPU {index} ({dtype}): {error}",
         "The correctness checks above tell whether the GPU works; the benchmark needs about 200 MiB of free GPU "
         "memory.", m.bench_failed, outside_the_build=True),
    Rule("bench-skipped", "--bench: {why}", "The rest of the check is complete without it.", m.bench_skipped,
         failed=False),
)

