"""`envkit add`, end to end: the real envs/torch.yaml, a real index on 127.0.0.1 whose wheels reproduce the cases,
real uv (and pip), the real check on the stand-in torch. The build is held: a package that needs any torch is added
and torch stays the same to the byte; one that needs another torch is refused before anything changes, with a next
step that works when pasted; a dependency is taken from PyPI even where the framework's index has the same name; an
addition that breaks the framework is undone."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from add_helpers import fingerprint, installed_versions, lab, record_json, torch_files
from conftest import CU126, Home

NAME = "torch-cu126"


@pytest.fixture(scope="module")
def made(tmp_path_factory, torch_wheels):
    """A home with the index served and one environment made (torch-cu126), shared by the tests that must leave it
    as it is; a test that changes an environment makes its own."""
    with lab(tmp_path_factory, torch_wheels, "add") as pair:
        yield pair


def _own(home: Home, name: str, *extra: str, env=None) -> Path:
    done = home.envkit("create", *CU126, "--name", name, "--yes", *extra, env=env)
    assert done.returncode == 0, done.stderr
    return home.prefix(name)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("envkit: error:")]


def test_a_package_that_needs_any_torch_is_added_and_torch_stays_the_same_to_the_byte(made):
    home, server = made
    prefix = _own(home, "any")
    torch_before = torch_files(prefix)
    seen = len(server.requests)
    done = home.envkit("add", "any", "anytorch", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {"name": "anytorch", "version": "1.0"} in out["added"] and out["check"]["ok"] is True
    assert out["held"] == ["torch==2.13.0+cu126", "torchaudio==2.11.0+cu126", "torchvision==0.28.0+cu126"]
    assert torch_files(prefix) == torch_before  # the same files, the same bytes
    assert installed_versions(prefix)["torch"] == "2.13.0+cu126"
    # confusable is on the framework's index too (9.0, a higher version): taken from PyPI, never asked of /whl
    assert home.in_env("any", "import confusable; print(confusable.WHERE)") == "pypi"
    asked = server.requests[seen:]
    assert asked and not any(path.startswith("/whl/") for path in asked), asked
    assert home.in_env("any", "import anytorch; print(anytorch.VERSION)") == "2.13.0+cu126"
    record = home.record("any")
    assert record["additions"] == ["anytorch"] and record["verify"]["ok"] is True


def test_a_package_that_needs_another_torch_is_refused_before_anything_changes(made):
    home, _ = made
    prefix = home.prefix(NAME)
    before, record = fingerprint(prefix), record_json(home, NAME)
    done = home.envkit("add", NAME, "oldtorch")
    assert done.returncode == 1, done.stderr
    [error] = _error_lines(done.stderr)
    assert "oldtorch needs torch==2.7.0" in error and "this environment is torch 2.13.0+cu126" in error, error
    assert "nothing was changed" in error
    assert fingerprint(prefix) == before and record_json(home, NAME) == record


def test_the_refusals_next_step_works_when_pasted(made):
    home, _ = made
    done = home.envkit("add", NAME, "oldtorch")
    hint = done.stderr.split("`")[1]  # the command the hint gives, between backquotes
    argv = shlex.split(hint)
    assert argv[:5] == ["envkit", "create", "torch", "--build", "torch-2.7-cu126"], hint
    made = home.envkit(*argv[1:], "--yes")
    assert made.returncode == 0, made.stderr
    name = argv[argv.index("--name") + 1]
    versions = installed_versions(home.prefix(name))
    assert versions["torch"] == "2.7.0+cu126" and versions["oldtorch"] == "1.0"
    assert home.record(name)["additions"] == ["oldtorch"]


def test_a_pinned_release_that_clashes_is_refused_with_the_newest_release_that_fits(made):
    home, _ = made
    prefix = _own(home, "pinned")
    before = fingerprint(prefix)
    done = home.envkit("add", "pinned", "needy==2.0")
    assert done.returncode == 1 and fingerprint(prefix) == before
    [error] = _error_lines(done.stderr)
    assert "needy" in error and "needs torch==2.7.0" in error, error
    hint = done.stderr.split("`")[1]
    assert hint == "envkit add pinned needy==1.0", done.stderr
    pasted = home.envkit(*shlex.split(hint)[1:])
    assert pasted.returncode == 0, pasted.stderr
    assert installed_versions(prefix)["needy"] == "1.0"


def test_a_companion_the_build_has_is_the_one_used(made):
    """timm needs torchvision: the build's own (0.28.0+cu126) serves it; PyPI's is never fetched."""
    home, server = made
    prefix = _own(home, "companion")
    seen = len(server.requests)
    done = home.envkit("add", "companion", "timm")
    assert done.returncode == 0, done.stderr
    assert installed_versions(prefix)["torchvision"] == "0.28.0+cu126"
    assert not any("torchvision-" in path for path in server.requests[seen:] if path.endswith(".whl"))


def test_a_companion_the_build_has_not_is_never_taken_from_pypi(made, tmp_path):
    """torch 2.15's builds have no torchvision: timm (which needs it) is refused, not given PyPI's torchvision."""
    home, _ = made
    prefix = _own(home, "novision")
    site = next(prefix.glob("lib/python*/site-packages"))
    constraints = prefix / ".envkit" / "constraints.txt"
    # as a build without torchvision holds it (envkit.backends.held): absent, from nowhere else
    constraints.write_text(constraints.read_text().replace("torchvision==0.28.0+cu126\n", "") + "torchvision<0\n")
    for path in [*site.glob("torchvision-*.dist-info")]:
        import shutil

        shutil.rmtree(path)
    done = home.envkit("add", "novision", "timm")
    assert done.returncode == 1
    [error] = _error_lines(done.stderr)
    assert "timm" in error and "needs torchvision" in error and "without torchvision" in error, error


def test_dry_run_shows_what_would_be_installed_and_changes_nothing(made):
    home, server = made
    prefix = home.prefix(NAME)
    before, record, seen = fingerprint(prefix), record_json(home, NAME), len(server.requests)
    done = home.envkit("add", NAME, "anytorch", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "+ anytorch==1.0" in done.stdout and "+ confusable==1.0" in done.stdout
    assert "torch 2.13.0+cu126" in done.stdout and "uv pip install" in done.stdout
    assert not any(path.endswith(".whl") for path in server.requests[seen:])
    assert fingerprint(prefix) == before and record_json(home, NAME) == record
    refused = home.envkit("add", NAME, "oldtorch", "--dry-run")
    assert refused.returncode == 1 and "needs torch==2.7.0" in refused.stderr


def test_a_newer_dependency_is_taken_and_a_failed_check_puts_everything_back(made):
    """breaktorch needs filelock >= 3.30 (the build installed 3.20: replaced) and breaks `import torch`: the check
    after adding fails, and the environment is as it was, filelock 3.20 included, to the byte."""
    home, _ = made
    prefix = _own(home, "broken")
    before, record = fingerprint(prefix), record_json(home, "broken")
    done = home.envkit("add", "broken", "breaktorch")
    assert done.returncode == 1, done.stderr
    assert "failed its check after the addition, so the addition was undone" in done.stderr
    assert fingerprint(prefix) == before and record_json(home, "broken") == record
    assert not list((prefix / ".envkit").glob("aside-*"))
    check = home.envkit("verify", "broken")
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_newer_dependency_replaces_the_one_the_build_installed(made):
    home, _ = made
    prefix = _own(home, "newer")
    torch_before = torch_files(prefix)
    done = home.envkit("add", "newer", "newfl", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["changed"] == [{"name": "filelock", "from": "3.20.0", "to": "3.30.0"}]
    assert torch_files(prefix) == torch_before
    assert not list((prefix / ".envkit").glob("aside-*"))


def test_requirements_files_and_what_was_added_are_recorded(made, tmp_path):
    home, _ = made
    _own(home, "listed")
    more = tmp_path / "more.txt"
    more.write_text("small==0.5  # an older one\n")
    listed = tmp_path / "requirements.txt"
    listed.write_text("# the lab's packages\nanytorch\n-r more.txt\n")
    done = home.envkit("add", "listed", "-r", str(listed))
    assert done.returncode == 0, done.stderr
    assert home.record("listed")["additions"] == ["anytorch", "small==0.5"]
    again = home.envkit("add", "listed", "small>=1")  # a package asked for again replaces what was asked of it
    assert again.returncode == 0, again.stderr
    assert home.record("listed")["additions"] == ["anytorch", "small>=1"]
    assert home.in_env("listed", "import small; print(small.ANSWER)") == "42"


@pytest.mark.parametrize("installer", ["pip"])
def test_pip_holds_the_build_as_uv_does(made, installer):
    home, _ = made
    env = {"ENVKIT_INSTALLER": installer}
    prefix = _own(home, "with-pip", env=env)
    before = fingerprint(prefix)
    refused = home.envkit("add", "with-pip", "oldtorch", env=env)
    assert refused.returncode == 1 and "oldtorch 1.0 needs torch==2.7.0" in refused.stderr, refused.stderr
    assert fingerprint(prefix) == before
    done = home.envkit("add", "with-pip", "anytorch", env=env)
    assert done.returncode == 0, done.stderr
    assert installed_versions(prefix)["torch"] == "2.13.0+cu126" and "anytorch" in installed_versions(prefix)
