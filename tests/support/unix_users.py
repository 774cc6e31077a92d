"""Real Unix users for tests of what several people share (an admin publishes, a user reads): made with useradd
and groupadd as root, removed with userdel -r and groupdel afterwards, and a directory every one of them can reach
(pytest's own temporary directories are private to the user running the tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: Path

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: float = 300,
            **kwargs) -> subprocess.CompletedProcess:
        """``argv`` run as this user with exactly ``env`` (and HOME, USER, LOGNAME), as a login would set them."""
        return subprocess.run(self.argv(argv, env), capture_output=True, text=True, timeout=timeout, **kwargs)

    def popen(self, argv: Sequence[str], env: Mapping[str, str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen(self.argv(argv, env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                **kwargs)

    def argv(self, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
        full = {"HOME": str(self.home), "USER": self.name, "LOGNAME": self.name, **env}
        return ["runuser", "-u", self.name, "--", "env", "-i", *(f"{k}={v}" for k, v in full.items()), *argv]


def why_not() -> Optional[str]:
    """Why real users cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "making Unix users (useradd) needs root"
    missing = [tool for tool in ("useradd", "userdel", "groupadd", "groupdel", "runuser") if not shutil.which(tool)]
    return f"missing {', '.join(missing)}" if missing else None


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)


@contextmanager
def public_directory() -> Iterator[Path]:
    """A directory under the system's temporary directory that every user can reach (0755)."""
    path = Path(tempfile.mkdtemp(prefix="envkit-users-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def users_and_group(parent: Path, names: Sequence[str], group: str, members: Sequence[str]) -> Iterator[dict]:
    """Users ``names`` (homes under ``parent``) and a group ``group`` of ``members``; all removed afterwards.
    Yields {"group": gid, name: User, ...}."""
    made_users: list[str] = []
    made_group = False
    try:
        _run("groupadd", group)
        made_group = True
        import grp
        import pwd

        out: dict = {"group": grp.getgrnam(group).gr_gid}
        for name in names:
            extra = ["-G", group] if name in members else []
            _run("useradd", "-m", "-d", str(parent / f"home-{name}"), "-s", "/bin/bash", *extra, name)
            made_users.append(name)
            entry = pwd.getpwnam(name)
            out[name] = User(name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))
        yield out
    finally:
        for name in made_users:
            subprocess.run(["userdel", "-r", name], capture_output=True, timeout=60)
        if made_group:
            subprocess.run(["groupdel", group], capture_output=True, timeout=60)


def _reachable(directory: Path, copy: Path, python: Path, user: User) -> str:
    """``directory``, or a copy of it at ``copy`` that every user can read when ``user`` cannot list it (a venv in a
    0700 directory, as CI's `mktemp -d` makes it)."""
    if user.run([str(python), "-c", f"import os; os.listdir({str(directory)!r})"], {"PATH": "/usr/bin:/bin"}
                ).returncode == 0:
        return str(directory)
    shutil.copytree(directory, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["chmod", "-R", "a+rX", str(copy)], check=True, timeout=300)
    return str(copy)


def public_python(parent: Path, user: User) -> Path:
    """A Python every user can run, with envkit and what it needs importable: a venv (no pip) of this Python's
    interpreter, or of /usr/bin/pythonX.Y when this one lives where others cannot reach (root's pyenv), whose
    site-packages adds this Python's. RuntimeError when there is none."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    base = Path(os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable))
    for candidate in (base, Path(f"/usr/bin/python{version}")):
        if candidate.exists() and user.run([str(candidate), "-c", "pass"], {"PATH": "/usr/bin:/bin"}).returncode == 0:
            break
    else:
        raise RuntimeError(f"no Python {version} that other users can run (this one is {base})")
    venv = parent / "python"
    subprocess.run([str(candidate), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    import site

    lib = venv / "lib" / f"python{version}" / "site-packages"
    dirs = [_reachable(Path(d), parent / f"site-{i}", candidate, user)
            for i, d in enumerate(site.getsitepackages()) if Path(d).is_dir()]
    repo = Path(__file__).resolve().parents[2]
    (lib / "envkit-tests.pth").write_text(
        f"import site; list(map(site.addsitedir, {dirs!r}))\n{repo}\n", encoding="utf-8")
    python = venv / "bin" / "python"
    import uv

    if user.run([uv.find_uv_bin(), "--version"], {"PATH": "/usr/bin:/bin"}).returncode != 0:  # in a 0700 venv
        shutil.copy2(uv.find_uv_bin(), venv / "bin" / "uv")  # where uv's own finder looks first
    check = user.run([str(python), "-c", "import envkit, typer, uv; uv.find_uv_bin()"], {"PATH": "/usr/bin:/bin"})
    if check.returncode != 0:
        raise RuntimeError(f"envkit cannot be imported by another user with {python}: {check.stderr.strip()[-300:]}")
    return python


def private_python(user: User, public: Path) -> Path:
    """A Python in ``user``'s own home (mode 0700), as an admin's pyenv install is (`~/.pyenv/versions/X.Y.Z`):
    a copy of the interpreter the venv ``public`` (:func:`public_python`) runs on, its standard library and
    libpython linked from there, and envkit importable as from ``public``. Only ``user`` (and root) can run it."""
    config = dict(line.split(" = ", 1) for line in (public.parents[1] / "pyvenv.cfg").read_text().splitlines()
                  if " = " in line)
    home = Path(config["home"])
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    real = Path(os.path.realpath(home / f"python{version}"))
    base = real.parent.parent
    root = user.home / ".pyenv" / "versions" / version
    (root / "bin").mkdir(parents=True)
    shutil.copy2(real, root / "bin" / f"python{version}")
    lib = root / "lib" / f"python{version}"
    lib.mkdir(parents=True)
    for entry in (base / "lib").glob("libpython*"):
        (root / "lib" / entry.name).symlink_to(entry)
    for entry in (base / "lib" / f"python{version}").iterdir():
        if entry.name not in ("site-packages", "dist-packages"):
            (lib / entry.name).symlink_to(entry)
    pth = (public.parents[1] / "lib" / f"python{version}" / "site-packages" / "envkit-tests.pth").read_text()
    for packages in (lib / "site-packages", root / "lib" / "python3" / "dist-packages"):  # (Debian's site.py: the
        packages.mkdir(parents=True)                                                    # latter)
        (packages / "envkit-tests.pth").write_text(pth)
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(user.home / ".pyenv")], check=True, timeout=60)
    os.chmod(user.home, 0o700)
    python = root / "bin" / f"python{version}"
    check = user.run([str(python), "-c", "import envkit, sys; print(sys._base_executable)"], {"PATH": "/usr/bin:/bin"})
    if check.returncode != 0 or check.stdout.strip() != str(python):
        raise RuntimeError(f"a private copy of {real} does not run envkit: {check.stderr.strip()[-300:]}")
    return python
