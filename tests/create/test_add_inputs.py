"""Bad input to `envkit add`: each is one sentence and exit 2 (exit 1 for an install that failed), never a traceback,
and the environment is left exactly as it was."""

from __future__ import annotations

import os

import pytest

from add_helpers import fingerprint, lab, record_json
from support.wheels import build_wheel

NAME = "torch-cu126"
TORCH_URL = ("torch @ https://download.pytorch.org/whl/cu130/torch-2.14.0%2Bcu130-cp311-cp311-"
             "manylinux_2_28_x86_64.whl")


@pytest.fixture(scope="module")
def made(tmp_path_factory, torch_wheels):
    with lab(tmp_path_factory, torch_wheels, "add-inputs") as (home, server):
        yield home, server, home.prefix(NAME)


def _file(home, name: str, text: str):
    path = home.root / name
    path.write_text(text, encoding="utf-8")
    return str(path)


CASES = {
    "a site environment": (["site:torch", "small"], 2, "site:torch is a site environment, and site environments are "
                                                         "read-only"),
    "no such environment": (["nope", "small"], 2, "envkit made no environment named 'nope'"),
    "an option as a package": ([NAME, "--", "--index-url=http://127.0.0.1:1/simple"], 2, "is an option, not a package"),
    "not a requirement": ([NAME, "torch>>2"], 2, "'torch>>2' is not a requirement"),
    "a URL to the framework's own wheel": ([NAME, TORCH_URL], 2, "is a file of torch itself"),
    "a local path that is not there": ([NAME, "./no-such-package.whl"], 2, "no such file or directory"),
    "no packages at all": ([NAME], 2, "no packages to add"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_sentence_and_changes_nothing(made, case):
    home, _, prefix = made
    args, code, said = CASES[case]
    before, record = fingerprint(prefix), record_json(home, NAME)
    done = home.envkit("add", *args)
    assert done.returncode == code, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("envkit: error:")]
    assert len(errors) == 1 and said in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    assert fingerprint(prefix) == before and record_json(home, NAME) == record


@pytest.mark.parametrize("line,said", [
    ("-i http://127.0.0.1:1/simple", "-i is refused: it would fetch packages from somewhere else"),
    ("--extra-index-url=http://127.0.0.1:1/simple", "--extra-index-url is refused"),
    ("-e ./src", "-e is refused: an editable install"),
    ("--find-links /tmp", "--find-links is refused"),
    ("-c other.txt", "-c is refused"),
])
def test_a_requirements_file_that_would_bypass_the_builds_indexes_is_refused(made, line, said):
    home, _, prefix = made
    before = fingerprint(prefix)
    listed = _file(home, "requirements.txt", f"small\n{line}\n")
    done = home.envkit("add", NAME, "-r", listed)
    assert done.returncode == 2, done.stderr
    assert f"{listed} line 2: {said}" in done.stderr, done.stderr
    assert fingerprint(prefix) == before


def test_empty_huge_and_framework_requirements_files(made, tmp_path):
    home, _, prefix = made
    before = fingerprint(prefix)
    empty = _file(home, "empty.txt", "# nothing yet\n\n")
    done = home.envkit("add", NAME, "-r", empty)
    assert done.returncode == 2 and f"{empty} names none" in done.stderr, done.stderr
    huge = home.root / "huge.txt"
    with open(huge, "wb") as out:
        out.truncate(2 << 30)  # 2 GB, sparse: nothing written to the disk
    done = home.envkit("add", NAME, "-r", str(huge))
    assert done.returncode == 2 and "is over 4 MiB, the most envkit reads of a requirements file" in done.stderr
    wheel = build_wheel(tmp_path, "torch", "2.7.0+cu126")  # a wheel of the framework itself, as a file
    framework = _file(home, "framework.txt", f"{wheel}\n")
    done = home.envkit("add", NAME, "-r", framework)
    assert done.returncode == 2 and "is a file of torch itself" in done.stderr, done.stderr
    os.unlink(huge)
    assert fingerprint(prefix) == before


def test_an_index_that_is_down_halfway_fails_and_changes_nothing(made):
    home, server, prefix = made
    before, record = fingerprint(prefix), record_json(home, NAME)
    server.fail_project("/pypi/simple", "confusable")  # anytorch's page answers, its dependency's does not
    done = home.envkit("add", NAME, "anytorch")
    assert done.returncode == 1, done.stderr
    [error] = [line for line in done.stderr.splitlines() if line.startswith("envkit: error:")]
    assert "installing anytorch failed" in error and "nothing was changed" in error, error
    assert fingerprint(prefix) == before and record_json(home, NAME) == record
