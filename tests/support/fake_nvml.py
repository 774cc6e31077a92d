"""A stand-in ``libnvidia-ml.so.1``, built with the machine's C compiler, for the Slurm "nodes" and for the tests
that need "this machine" to be a known one whatever the host has (a developer's GPU workstation).

The real nvidia-ml-py loads it (through ``LD_LIBRARY_PATH``, which the loader searches before the system's own
library) and calls the same C functions it calls on a real driver. It answers from the file ``$FAKE_NVML_MACHINE``
when that is set, else from ``$FAKE_NVML_DIR/$SLURMD_NODENAME``, so each node of the test cluster has its own GPUs;
outside a job (no ``SLURMD_NODENAME``: the login node) it answers as a machine without a loaded driver does. As the
real library, it ignores ``CUDA_VISIBLE_DEVICES``: it lists every GPU of the node.

A node file has one fact per line::

    driver 535.129.03
    cuda 12020
    gpu 8 0 40960 NVIDIA A100-SXM4-40GB      # major minor memory-MiB name
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Iterable

SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OK 0
#define ERR_UNINITIALIZED 1
#define ERR_INVALID_ARGUMENT 2
#define ERR_INSUFFICIENT_SIZE 7
#define ERR_DRIVER_NOT_LOADED 9
#define MAX_GPUS 16

typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct { char name[96]; int major, minor; unsigned long long mib; } gpu_t;

static int loaded = 0;
static char driver[80];
static int cuda = 0;
static unsigned int count = 0;
static gpu_t gpus[MAX_GPUS];

static int load(void) {
    const char *machine = getenv("FAKE_NVML_MACHINE");
    const char *dir = getenv("FAKE_NVML_DIR"), *node = getenv("SLURMD_NODENAME");
    char path[4096], line[512];
    if (machine && *machine) snprintf(path, sizeof path, "%s", machine);
    else if (dir && node) snprintf(path, sizeof path, "%s/%s", dir, node);
    else return ERR_DRIVER_NOT_LOADED;
    FILE *f = fopen(path, "r");
    if (!f) return ERR_DRIVER_NOT_LOADED;
    count = 0; cuda = 0; driver[0] = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "driver ", 7)) snprintf(driver, sizeof driver, "%s", line + 7);
        else if (!strncmp(line, "cuda ", 5)) cuda = atoi(line + 5);
        else if (!strncmp(line, "gpu ", 4) && count < MAX_GPUS) {
            gpu_t *g = &gpus[count];
            int used = 0;
            if (sscanf(line + 4, "%d %d %llu %n", &g->major, &g->minor, &g->mib, &used) >= 3 && used > 0) {
                snprintf(g->name, sizeof g->name, "%s", line + 4 + used);
                count++;
            }
        }
    }
    fclose(f);
    return OK;
}

int nvmlInitWithFlags(unsigned int flags) { (void)flags; int r = load(); loaded = (r == OK); return r; }
int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
int nvmlInit(void) { return nvmlInitWithFlags(0); }
int nvmlShutdown(void) { if (!loaded) return ERR_UNINITIALIZED; loaded = 0; return OK; }

const char *nvmlErrorString(int result) {
    switch (result) {
    case OK: return "Success";
    case ERR_UNINITIALIZED: return "Uninitialized";
    case ERR_INVALID_ARGUMENT: return "Invalid Argument";
    case ERR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case ERR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

int nvmlSystemGetDriverVersion(char *out, unsigned int length) {
    if (!loaded) return ERR_UNINITIALIZED;
    if (strlen(driver) + 1 > length) return ERR_INSUFFICIENT_SIZE;
    strcpy(out, driver);
    return OK;
}

int nvmlSystemGetCudaDriverVersion(int *out) { if (!loaded) return ERR_UNINITIALIZED; *out = cuda; return OK; }
int nvmlSystemGetCudaDriverVersion_v2(int *out) { return nvmlSystemGetCudaDriverVersion(out); }

int nvmlDeviceGetCount_v2(unsigned int *out) { if (!loaded) return ERR_UNINITIALIZED; *out = count; return OK; }
int nvmlDeviceGetCount(unsigned int *out) { return nvmlDeviceGetCount_v2(out); }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **handle) {
    if (!loaded) return ERR_UNINITIALIZED;
    if (index >= count) return ERR_INVALID_ARGUMENT;
    *handle = (void *)(unsigned long)(index + 1);
    return OK;
}
int nvmlDeviceGetHandleByIndex(unsigned int index, void **handle) { return nvmlDeviceGetHandleByIndex_v2(index, handle); }

static gpu_t *gpu_of(void *handle) {
    unsigned long i = (unsigned long)handle;
    return (loaded && i >= 1 && i <= count) ? &gpus[i - 1] : NULL;
}

int nvmlDeviceGetName(void *handle, char *out, unsigned int length) {
    gpu_t *g = gpu_of(handle);
    if (!g) return ERR_INVALID_ARGUMENT;
    if (strlen(g->name) + 1 > length) return ERR_INSUFFICIENT_SIZE;
    strcpy(out, g->name);
    return OK;
}

int nvmlDeviceGetMemoryInfo(void *handle, memory_t *memory) {
    gpu_t *g = gpu_of(handle);
    if (!g) return ERR_INVALID_ARGUMENT;
    memory->total = g->mib * 1024ULL * 1024ULL;
    memory->free = memory->total;
    memory->used = 0;
    return OK;
}

int nvmlDeviceGetCudaComputeCapability(void *handle, int *major, int *minor) {
    gpu_t *g = gpu_of(handle);
    if (!g) return ERR_INVALID_ARGUMENT;
    *major = g->major;
    *minor = g->minor;
    return OK;
}
"""


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def build_library(directory: Path) -> Path:
    """Compile the stand-in into ``directory/libnvidia-ml.so.1``; RuntimeError when it cannot."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc) to build the stand-in libnvidia-ml.so.1")
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "fake_nvml.c"
    source.write_text(SOURCE)
    library = directory / "libnvidia-ml.so.1"
    done = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(library), str(source)],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"building the stand-in libnvidia-ml.so.1 failed: {done.stderr.strip()}")
    return library


def write_node(directory: Path, node: str, driver: str, cuda: int,
               gpus: Iterable[tuple[str, tuple[int, int], int]]) -> Path:
    """The file the stand-in reads on ``node``: gpus are (name, (major, minor), memory MiB)."""
    return write_machine(directory / node, driver, cuda, gpus)


def write_machine(path: Path, driver: str, cuda: int, gpus: Iterable[tuple[str, tuple[int, int], int]]) -> Path:
    """A file the stand-in reads (``$FAKE_NVML_MACHINE``, or a node's): the driver version, the CUDA it supports
    (NVML's integer: 12040 for 12.4) and the GPUs, each (name, (major, minor), memory MiB)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"driver {driver}", f"cuda {cuda}"]
    lines += [f"gpu {major} {minor} {mib} {name}" for name, (major, minor), mib in gpus]
    path.write_text("\n".join(lines) + "\n")
    return path


def real_library_present() -> bool:
    """Whether this host's loader finds a real libnvidia-ml.so.1 (an NVIDIA driver), asked through ctypes: the tests
    of what envkit does without one skip on a GPU machine."""
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True
