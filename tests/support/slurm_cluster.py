"""A real two-node Slurm cluster on localhost, in a temporary directory, for the tests.

munged with its own key and socket, one slurmctld and two slurmd (one ``slurmd -N NAME`` per node, each on its own
port, ``%n`` in their spool/pid/log paths), all in the foreground as children of the test process, so they are
stopped by their own pids (never by name). GPUs are GRES ``gpu`` entries whose device files are symlinks to
/dev/null. Clients find the cluster through ``SLURM_CONF`` (see ``SlurmCluster.env``).

Stopping: ``scontrol shutdown`` first (it lets slurmctld save and the slurmds exit), then SIGTERM and SIGKILL to
each daemon this module started, by pid.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

DEBIAN_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
PROGRAMS = ("munged", "slurmctld", "slurmd", "sinfo", "srun", "sbatch", "scontrol", "scancel", "squeue")
QUERY_TIMEOUT = 10.0  # seconds for any one client call: sinfo hangs while slurmctld is not listening


@dataclass(frozen=True)
class Node:
    name: str
    gpus: int
    gpu_type: str
    features: str
    cpus: int = 2


# gpu-a1 and gpu-a2 share a configuration (A100 x2), gpu-v1 differs (V100 x1): the mixed partition is heterogeneous.
# gpu-m1 has two AMD GPUs (GRES gpu:mi300x:2; its KFD topology is a fake sysfs of real MI300X files, per node).
DEFAULT_NODES = (
    Node("gpu-a1", 2, "a100", "a100"),
    Node("gpu-a2", 2, "a100", "a100"),
    Node("gpu-v1", 1, "v100", "v100"),
    Node("gpu-m1", 2, "mi300x", "mi300x"),
    Node("cpu-1", 0, "", "cpu"),
)
DEFAULT_PARTITIONS = {
    "part-a": ("gpu-a1", "gpu-a2"),
    "part-v": ("gpu-v1",),
    "mixed": ("gpu-a1", "gpu-a2", "gpu-v1"),
    "part-amd": ("gpu-m1",),
    "cpu": ("cpu-1",),
}
DOWN_PARTITION = "closed"  # State=DOWN: jobs are accepted and never start (the timeout path)


def slurm_required(environ: Mapping[str, str]) -> bool:
    """Whether a missing Slurm fails the tests instead of skipping them: under CI (CI=true, as CI services set it,
    or ENVKIT_TEST_REQUIRE_SLURM=1, as .ci/run does)."""
    return environ.get("CI", "").lower() == "true" or environ.get("ENVKIT_TEST_REQUIRE_SLURM") == "1"


def missing_programs(programs: Sequence[str] = PROGRAMS) -> list[str]:
    return [name for name in programs if shutil.which(name) is None]


def install_debian_packages(packages: Sequence[str] = DEBIAN_PACKAGES, programs: Sequence[str] = PROGRAMS,
                            what: str = "Slurm") -> Optional[str]:
    """apt-get install the Slurm and munge packages (or ``packages``, which give ``programs``; root only). None on
    success, else why it could not."""
    if os.geteuid() != 0:
        return f"{what} is not installed and installing it needs root (apt-get install -y " + " ".join(
            packages) + ")"
    if shutil.which("apt-get") is None:
        return f"{what} is not installed and there is no apt-get to install it with"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update"],
                 ["apt-get", "install", "-y", "--no-install-recommends", *packages]):
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            return f"{' '.join(argv)} failed: {done.stderr.strip()[-500:]}"
    missing = missing_programs(programs)
    return f"still missing after apt-get: {', '.join(missing)}" if missing else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class SlurmCluster:
    root: Path
    nodes: tuple[Node, ...] = DEFAULT_NODES
    partitions: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_PARTITIONS))
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    def env(self, base: Optional[dict[str, str]] = None) -> dict[str, str]:
        """An environment whose Slurm clients talk to this cluster."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        return env

    # --- configuration -----------------------------------------------------------------------------------------
    def write_config(self) -> None:
        etc, dev = self.root / "etc", self.root / "dev"
        for directory in (etc, dev, self.root / "state", self.root / "spool", self.root / "log", self.root / "run",
                          self.root / "munge"):
            directory.mkdir(parents=True, exist_ok=True)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        (self.root / "munge").chmod(0o700)
        user = _user()
        lines = [
            "ClusterName=envkit-test",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={_free_port()}",
            f"SlurmUser={user}",
            f"SlurmdUser={user}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool'}/%n",
            f"SlurmctldPidFile={self.root / 'run'}/slurmctld.pid",
            f"SlurmdPidFile={self.root / 'run'}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.root / 'log'}/slurmctld.log",
            f"SlurmdLogFile={self.root / 'log'}/slurmd-%n.log",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "GresTypes=gpu",
            "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=60",
            "MessageTimeout=10",
            "KillWait=2",
            "InactiveLimit=0",
            "MinJobAge=300",
        ]
        gres = ["AutoDetect=off"]
        for node in self.nodes:
            gres_field = f" Gres=gpu:{node.gpu_type}:{node.gpus}" if node.gpus else ""
            lines.append(
                f"NodeName={node.name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={_free_port()} "
                f"CPUs={node.cpus} RealMemory=1000{gres_field} Feature={node.features} State=UNKNOWN"
            )
            for index in range(node.gpus):
                device = dev / f"{node.name}-nvidia{index}"
                if not device.is_symlink():
                    device.symlink_to("/dev/null")
                gres.append(f"NodeName={node.name} Name=gpu Type={node.gpu_type} File={device}")
        for name, members in self.partitions.items():
            lines.append(f"PartitionName={name} Nodes={','.join(members)} MaxTime=INFINITE State=UP")
        first = self.nodes[0].name
        lines.append(f"PartitionName={DOWN_PARTITION} Nodes={first} State=DOWN")
        self.conf.write_text("\n".join(lines) + "\n")
        (etc / "gres.conf").write_text("\n".join(gres) + "\n")

    @property
    def munge_socket(self) -> Path:
        """Beside the pid files (0755), not with munged's key (0700): a cluster under a directory every user reaches
        takes jobs from other users than the one who started it (tests/slurm/test_shared_job_users.py)."""
        return self.root / "run" / "munge.sock"

    # --- start and stop ----------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")
        try:
            self.processes[name] = subprocess.Popen(
                argv, env=self.env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()

    def start(self, timeout: float = 60.0) -> None:
        self.write_config()
        munge = self.root / "munge"
        self._spawn("munged", [
            "munged", "--foreground", "--force", f"--socket={self.munge_socket}",
            f"--key-file={munge / 'munge.key'}", f"--pid-file={munge / 'munged.pid'}",
            f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'munged.seed'}",
        ])
        _wait_for(lambda: self.munge_socket.exists(), 10, "munged did not create its socket", self)
        self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-f", str(self.conf)])
        _wait_for(self._controller_answers, timeout, "slurmctld did not answer", self)
        for node in self.nodes:
            self._spawn(f"slurmd-{node.name}", ["slurmd", "-D", "-N", node.name, "-f", str(self.conf)])
        _wait_for(self._all_idle, timeout, "the slurmd nodes did not come up idle", self)

    def _controller_answers(self) -> bool:
        self._check_alive()
        return self.query(["scontrol", "ping"], timeout=3).returncode == 0

    def _all_idle(self) -> bool:
        self._check_alive()
        done = self.query(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=5)
        if done.returncode != 0:
            return False
        states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
        return all(states.get(node.name, "").startswith("idle") for node in self.nodes)

    def _check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited ({process.returncode}):\n{self.logs()}")

    def query(self, argv: list[str], timeout: float = QUERY_TIMEOUT) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(argv, env=self.env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(argv, 124, exc.stdout or "", f"timed out after {timeout} s")

    def jobs(self) -> list[str]:
        """Ids of the jobs waiting or running (not those completing)."""
        done = self.query(["squeue", "-h", "-t", "PENDING,RUNNING,CONFIGURING,SUSPENDED", "-o", "%i"])
        return done.stdout.split() if done.returncode == 0 else []

    def cancel_all(self) -> None:
        for job in self.jobs():
            self.query(["scancel", job])

    def stop(self) -> None:
        if not self.processes:
            return
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            self.query(["scontrol", "shutdown"], timeout=10)
        deadline = time.monotonic() + 10
        for name in [n for n in self.processes if n != "munged"] + (["munged"] if "munged" in self.processes
                                                                      else []):
            process = self.processes[name]
            remaining = max(0.1, deadline - time.monotonic())
            if name == "munged" or process.poll() is None:
                try:
                    process.wait(timeout=remaining if name != "munged" else 0.1)
                except subprocess.TimeoutExpired:
                    pass
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if process.poll() is not None:
                    break
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    continue
        self.processes.clear()

    def logs(self) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            text = path.read_text(errors="replace")
            parts.append(f"--- {path.name}\n{text[-3000:]}")
        return "\n".join(parts)


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def _wait_for(condition, timeout: float, what: str, cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} within {timeout} s:\n{cluster.logs()}")
