"""`envkit list` answers again from the user's cache (envkit.catalog.cache.cached_answer), and never stale: any change
to what the listing is computed from (the manifests, the machines, the options, envkit's code) is a new answer.
Run as a user runs it, in subprocesses sharing one cache directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from envkit.state import filecache
from envkit.state.filecache import EVERY_MODULE, cached_text

PROFILES = Path(__file__).parent / "profiles"


@pytest.fixture
def envkit(tmp_path: Path):
    """envkit(*args, env=...) with a cache of this test's own, so that its entries can be counted."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ENVKIT_")}
    environ["XDG_CACHE_HOME"] = str(tmp_path / "cache")

    def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True,
                              env={**environ, **(env or {})}, timeout=60)

    return run


def answers(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "envkit" / "listing").glob("*.txt"))


def listed(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def entry_of(key: str, answer: str) -> bytes:
    """An entry as envkit.state.filecache keeps text: the key, a NUL, the answer, and the CRC-32 of both in hex."""
    body = f"{key}\0{answer}".encode()
    return body + b"%08x" % zlib.crc32(body)


def test_a_repeated_listing_is_the_kept_answer(envkit, tmp_path: Path):
    args = ("list", "torch", "--json", "--machine", str(PROFILES / "h100-cuda128.yaml"))
    first = envkit(*args)
    [entry] = answers(tmp_path)
    key, _, kept = entry.read_bytes()[:-8].decode().partition("\0")
    assert entry.read_bytes() == entry_of(key, kept)
    assert kept == first.stdout.rstrip("\n") and "h100" in key
    # what the next run prints comes from here (a listing as envkit writes one, marked)
    marked = {"schema_version": 1, "manifests": [], "machines": [], "kept": True}
    entry.write_bytes(entry_of(key, json.dumps(marked)))
    assert listed(envkit(*args)) == marked


@pytest.mark.parametrize("damage", ["cut short", "one byte changed", "empty"])
def test_a_damaged_answer_is_computed_again_not_printed(envkit, tmp_path: Path, damage: str):
    args = ("list", "torch", "--json", "--machine", str(PROFILES / "h100-cuda128.yaml"))
    first = envkit(*args)
    [entry] = answers(tmp_path)
    whole = entry.read_bytes()
    damaged = {"cut short": whole[: len(whole) // 2 + 8], "empty": b"",
               "one byte changed": whole[:-100] + bytes([whole[-100] ^ 1]) + whole[-99:]}[damage]
    entry.write_bytes(damaged)
    again = envkit(*args)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert entry.read_bytes() == whole  # and kept again, whole


def test_every_input_of_the_listing_is_a_new_answer(envkit, envs_copy: Path, tmp_path: Path):
    profile = tmp_path / "node.yaml"
    shutil.copy(PROFILES / "h100-cuda128.yaml", profile)
    base = ("list", "torch", "--manifests", str(envs_copy), "--machine", str(profile))
    first = envkit(*base, "--json")
    assert listed(envkit(*base, "--json")) == listed(first) and len(answers(tmp_path)) == 1

    torch = envs_copy / "torch.yaml"  # the manifest
    torch.write_text(torch.read_text().replace("summary: PyTorch", "summary: Edited PyTorch"))
    edited = listed(envkit(*base, "--json"))
    assert edited["manifests"][0]["summary"].startswith("Edited") and len(answers(tmp_path)) == 2

    profile.write_text(profile.read_text().replace('cuda_driver: "12.8"', 'cuda_driver: "12.1"'))  # the machine
    older = listed(envkit(*base, "--json"))
    assert older["machine"]["cuda_driver"] == "12.1" and older != edited and len(answers(tmp_path)) == 3

    for option in (("--cuda", "11.8"), ("--python", "3.10"), ("--gpu-arch", "7.0")):  # the options
        changed = listed(envkit(*base, "--json", *option))
        assert changed != older, option
    text, text_all = envkit(*base), envkit(*base, "--all")
    assert text.returncode == text_all.returncode == 0 and text.stdout != text_all.stdout
    assert len(answers(tmp_path)) == 3 + 3 + 2


def test_a_listing_that_fails_is_not_kept(envkit, tmp_path: Path):
    args = ("list", "torch", "--json", "--machine", str(PROFILES / "h100-cuda128.yaml"))
    listed(envkit(*args))
    for _ in range(2):
        result = envkit(*args, "--python", "2.6")
        assert result.returncode == 2 and "Traceback" not in result.stderr and "2.6" in result.stderr
    assert len(answers(tmp_path)) == 1


def test_the_machine_detected_here_is_part_of_the_answer(envkit, this_machine, tmp_path: Path):
    """The same command on this machine is another answer when its GPUs change (or a job hides some)."""
    a100 = {"name": "NVIDIA A100-SXM4-80GB", "capability": (8, 0), "memory": 80 * 2**30}
    k80 = {"name": "Tesla K80", "capability": (3, 7), "memory": 12 * 2**30}
    modern, legacy = this_machine([a100]), this_machine([k80], driver="470.256.02", cuda=11040)
    seen = [listed(envkit("list", "torch", "--json", env=env))["machine"] for env in (modern, legacy, modern)]
    assert [gpu["name"] for m in seen for gpu in m["gpus"]] == [a100["name"], k80["name"], a100["name"]]
    hidden = listed(envkit("list", "torch", "--json", env={**modern, "CUDA_VISIBLE_DEVICES": ""}))["machine"]
    assert hidden["gpus"] == [] and len(answers(tmp_path)) == 3


def test_every_module_is_every_module_of_envkit_wherever_the_cache_module_sits():
    """EVERY_MODULE walks envkit's own directory, not the package the cache module is in (envkit/state/): a change to
    envkit/pick/resolve.py must be a miss too."""
    import envkit

    assert filecache.ENVKIT == Path(envkit.__file__).resolve().parent


def test_a_change_to_any_module_of_envkit_is_a_miss(tmp_path: Path, monkeypatch):
    """The listing is computed by much of envkit: EVERY_MODULE keys it on all of it, found afresh each time (a
    module added, removed or edited), not on a list that would go stale."""
    package = tmp_path / "envkit"
    (package / "sub").mkdir(parents=True)
    (package / "__pycache__").mkdir()
    for module in ("__init__.py", "sub/render.py", "__pycache__/stale.py"):
        (package / module).write_text("# code\n")
    monkeypatch.setattr(filecache, "ENVKIT", package)
    computed = []

    def answer() -> str:
        computed.append(len(computed))
        return f"answer {len(computed)}"

    def ask() -> str:
        return cached_text(tmp_path / "cache", "listing", [], EVERY_MODULE, answer)

    assert ask() == ask() == "answer 1"
    (package / "__pycache__" / "stale.py").write_text("# not code\n")  # compiled files are not the code
    assert ask() == "answer 1"
    (package / "sub" / "render.py").write_text("# edited code\n")
    assert ask() == "answer 2"
    (package / "sub" / "new.py").write_text("# code\n")
    assert ask() == "answer 3"
    (package / "sub" / "new.py").unlink()
    assert ask() == "answer 2" and len(computed) == 3  # as it was, and still kept

    elsewhere = tmp_path / "elsewhere"  # a package directory that is a link (a developer's checkout of a part)
    elsewhere.mkdir()
    (elsewhere / "part.py").write_text("# code\n")
    (package / "linked").symlink_to(elsewhere)
    (package / "sub" / "loop").symlink_to(package)  # walked once, not forever
    assert ask() == "answer 4"
    (elsewhere / "part.py").write_text("# edited code\n")
    assert ask() == "answer 5"


def test_the_kept_answer_follows_envkits_code_the_python_and_the_manifests(envs_copy: Path, tmp_path: Path,
                                                                          monkeypatch):
    """cached_answer, as `envkit list` calls it: a changed module of envkit, another Python, or an edited manifest is
    another answer."""
    from envkit.catalog.cache import cached_answer

    package = tmp_path / "envkit"
    package.mkdir()
    (package / "render.py").write_text("# code\n")
    monkeypatch.setattr(filecache, "ENVKIT", package)
    computed: list[int] = []

    def ask() -> str:
        def answer() -> str:
            computed.append(len(computed))
            return f"answer {len(computed)}"

        return cached_answer(envs_copy, ["torch"], tmp_path / "cache", "listing", answer, extra=("the request",))

    assert ask() == ask() == "answer 1"
    (package / "render.py").write_text("# fixed code\n")
    assert ask() == "answer 2"
    monkeypatch.setattr(sys, "version", "3.99.0 (another Python)")
    assert ask() == "answer 3"
    (envs_copy / "torch.yaml").write_text((envs_copy / "torch.yaml").read_text() + "\n# edited\n")
    assert ask() == "answer 4"
    (envs_copy / "jax.yaml").write_text((envs_copy / "jax.yaml").read_text() + "\n# not asked for\n")
    assert ask() == "answer 4"


def test_a_text_answer_keeps_every_character(tmp_path: Path):
    text = "a NUL \0 inside, é, and a last line\n"
    assert cached_text(tmp_path, "answer", [], (), lambda: text) == text
    assert cached_text(tmp_path, "answer", [], (), lambda: "recomputed") == text
