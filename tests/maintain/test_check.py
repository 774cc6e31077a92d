"""`manifests check` against a real index on 127.0.0.1 that misbehaves on request, a file:// mirror and a local
conda channel: every miss in words, retries that recover, failures that are reported while the run goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from maintain_helpers import complete_index, index, manifests, wheels  # noqa: F401 (fixtures)
from packaging.version import Version

from envkit.catalog import load_catalog
from envkit.errors import BadInputError, UnknownNameError
from envkit.maintain.check import LISTED, MISSING, NEW, UNREADABLE, check_builds
from envkit.maintain.fetch import FetchSettings
from envkit.state.config import Config, Mirror

FAST = FetchSettings(timeout_s=0.5, retries=2, backoff_s=0.01, jobs=4)


def mirrored(index, **more) -> Config:
    mirrors = {"https://download.pytorch.org/whl": f"{index.url}/whl", "https://pypi.org/simple": f"{index.url}/pypi",
               **more}
    return Config(path=None, mirrors=tuple(Mirror(u, t) for u, t in mirrors.items()))


def run(manifests: Path, config: Config, **options):
    catalog = load_catalog(manifests)
    return check_builds(catalog, config, settings=options.pop("settings", FAST), **options)


def messages(report, kind):
    return [f.message for f in report.findings if f.kind == kind]


def test_a_complete_index_passes_and_each_page_is_read_once(manifests, index):
    complete_index(index)
    report = run(manifests, mirrored(index))
    assert report.ok and report.findings == ()
    assert report.builds == ("torch-2.14-cu130", "torch-2.14-cpu")
    assert report.pythons["torch-2.14-cu130"] == ("3.11", "3.12", "3.13")
    for variant in ("cu130", "cpu"):
        for project in ("torch", "torchvision", "torchaudio"):
            assert index.count(f"/whl/{variant}/{project}/") == 1
    assert report.mirrors["https://download.pytorch.org/whl/cu130"] == f"{index.url}/whl/cu130"


def test_a_package_missing_from_one_variant_index(manifests, index):
    complete_index(index, variants=("cpu",))
    index.add("/whl/cu130", [*wheels("torch", "2.14.0+cu130"), *wheels("torchvision", "0.29.1+cu130"),
                             *wheels("torchaudio", "2.10.0+cu130")])  # only an older torchaudio line
    report = run(manifests, mirrored(index))
    assert messages(report, MISSING) == [
        "torch-2.14-cu130: torchaudio==2.11.* has no file on https://download.pytorch.org/whl/cu130"]
    assert not report.ok


def test_wheels_for_only_one_python_name_the_others(manifests, index):
    complete_index(index, variants=("cpu",))
    index.add("/whl/cu130", [*wheels("torch", "2.14.0+cu130", pythons=("312",)),
                             *wheels("torchvision", "0.29.1+cu130"), *wheels("torchaudio", "2.11.0+cu130")])
    report = run(manifests, mirrored(index))
    assert messages(report, MISSING) == [
        "torch-2.14-cu130: no torch wheel for Python 3.11, 3.13 (torch==2.14.* on "
        "https://download.pytorch.org/whl/cu130)"]


def test_python_selection_limits_what_is_asked(manifests, index):
    complete_index(index, variants=("cpu",))
    index.add("/whl/cu130", [*wheels("torch", "2.14.0+cu130", pythons=("312",)),
                             *wheels("torchvision", "0.29.1+cu130"), *wheels("torchaudio", "2.11.0+cu130")])
    report = run(manifests, mirrored(index), pythons=[Version("3.12")], build_ids=["torch-2.14-cu130"])
    assert report.ok and report.builds == ("torch-2.14-cu130",)
    assert index.count("/whl/cpu/torch/") == 0


def test_a_python_no_selected_build_publishes_is_not_a_check_that_passed(manifests, index):
    with pytest.raises(BadInputError, match="no build given with --build publishes Python 3.7: nothing to check"):
        run(manifests, mirrored(index), pythons=[Version("3.7")], build_ids=["torch-2.14-cu130"])
    assert index.count("/whl/") == 0  # nothing was asked


def test_an_abi3_wheel_serves_every_newer_python(manifests, index):
    complete_index(index, variants=("cpu",))
    index.add("/whl/cu130", [*wheels("torch", "2.14.0+cu130"), *wheels("torchvision", "0.29.1+cu130"),
                             *wheels("torchaudio", "2.11.0+cu130", abi3=True)])
    assert run(manifests, mirrored(index)).ok


def test_requires_python_on_the_index_is_respected(manifests, index):
    complete_index(index, variants=("cpu",))
    pure = "torchaudio-2.11.0-py3-none-any.whl"
    index.add("/whl/cu130", [*wheels("torch", "2.14.0+cu130"), *wheels("torchvision", "0.29.1+cu130"), pure],
              requires_python={pure: ">=3.12"})
    [message] = messages(run(manifests, mirrored(index)), MISSING)
    assert message.startswith("torch-2.14-cu130: no torchaudio wheel for Python 3.11 (torchaudio==2.11.* on "
                              "https://download.pytorch.org/whl/cu130); it is not the build's framework but a "
                              "companion of it")


def test_pep_691_json_pages_are_used_where_offered(manifests, index):
    complete_index(index, variants=("cpu",))
    index.add("/whl/cu130", [*wheels("torch", "2.14.0+cu130", pythons=("312",)),
                             *wheels("torchvision", "0.29.1+cu130"), *wheels("torchaudio", "2.11.0+cu130")],
              json_pages=True)
    report = run(manifests, mirrored(index))
    assert index.json_pages_served == 3
    assert [f.build for f in report.findings] == ["torch-2.14-cu130"]
    assert "Python 3.11, 3.13" in report.findings[0].message


def test_a_404_index_is_a_missing_package(manifests, index):
    complete_index(index, variants=("cpu",))  # nothing at all under /whl/cu130
    missing = messages(run(manifests, mirrored(index)), MISSING)
    assert len(missing) == 3
    assert "torch-2.14-cu130: torch==2.14.* has no file on https://download.pytorch.org/whl/cu130 (no torch page " \
           f"on its mirror {index.url}/whl/cu130/torch/, HTTP 404)" in missing  # the mirror's 404, not the upstream's


def test_a_500_then_success_is_retried(manifests, index):
    complete_index(index)
    index.fail("/whl/cu130/torch/", 500, times=2)
    index.fail("/whl/cpu/torch/", 429, times=1)
    report = run(manifests, mirrored(index))
    assert report.ok
    assert index.count("/whl/cu130/torch/") == 3 and index.count("/whl/cpu/torch/") == 2


def test_a_500_that_persists_is_reported_and_the_rest_is_checked(manifests, index):
    complete_index(index)
    index.fail("/whl/cu130/torch/", 503, times=10)
    report = run(manifests, mirrored(index))
    assert messages(report, UNREADABLE) == [
        f"torch-2.14-cu130: torch==2.14.* could not be checked: https://download.pytorch.org/whl/cu130/torch/, read "
        f"from its mirror {index.url}/whl/cu130/torch/ (HTTP 503 Service Unavailable (3 tries))"]
    assert index.count("/whl/cu130/torch/") == 3 and not report.ok
    assert index.count("/whl/cpu/torchaudio/") == 1


def test_a_connection_reset_is_retried(manifests, index):
    complete_index(index)
    index.reset("/whl/cu130/torchvision/")
    assert run(manifests, mirrored(index)).ok
    assert index.count("/whl/cu130/torchvision/") == 2


def test_resets_on_every_try_are_reported(manifests, index):
    complete_index(index)
    index.reset("/whl/cpu/torchvision/", times=5)
    unreadable = messages(run(manifests, mirrored(index)), UNREADABLE)
    assert len(unreadable) == 1 and "connection failed" in unreadable[0] and "torchvision" in unreadable[0]


def test_a_server_that_hangs_times_out_and_the_run_finishes(manifests, index):
    complete_index(index)
    index.hang("/whl/cu130/torchaudio/")
    settings = FetchSettings(timeout_s=0.3, retries=1, backoff_s=0.01, jobs=4)
    report = run(manifests, mirrored(index), settings=settings)
    assert messages(report, UNREADABLE) == [
        "torch-2.14-cu130: torchaudio==2.11.* could not be checked: https://download.pytorch.org/whl/cu130/"
        f"torchaudio/, read from its mirror {index.url}/whl/cu130/torchaudio/ (no answer within 0.3 s (2 tries))"]
    assert messages(report, MISSING) == []


def test_a_file_mirror_is_read_from_disk(manifests, tmp_path):
    root = tmp_path / "mirror" / "whl"
    for variant in ("cu130", "cpu"):
        for name, version in (("torch", "2.14.0"), ("torchvision", "0.29.1"), ("torchaudio", "2.11.0")):
            project = root / variant / name
            project.mkdir(parents=True)
            pythons = ("312",) if (variant, name) == ("cpu", "torch") else ("311", "312", "313")
            for wheel in wheels(name, f"{version}+{variant}", pythons=pythons):
                (project / wheel).write_bytes(b"")  # a flat directory: no index.html
    (root / "cu130" / "torchaudio" / "index.html").write_text(
        '<a href="torchaudio-2.11.0-py3-none-any.whl">torchaudio-2.11.0-py3-none-any.whl</a>')
    config = Config(path=None, mirrors=(Mirror("https://download.pytorch.org/whl", root.as_uri()),))
    assert messages(run(manifests, config), MISSING) == [
        "torch-2.14-cpu: no torch wheel for Python 3.11, 3.13 (torch==2.14.* on https://download.pytorch.org/whl/cpu)"]


def test_an_unknown_build_is_bad_input(manifests, index):
    with pytest.raises(UnknownNameError, match="torch-9.9-cpu"):
        run(manifests, mirrored(index), build_ids=["torch-9.9-cpu"])


def test_new_upstream_releases_are_listed_without_failing(manifests, index):
    complete_index(index)
    index.add("/whl/cu130", wheels("torch", "2.15.0+cu130"))
    index.add("/whl", [*wheels("torch", "2.14.0+cu130"), *wheels("torch", "2.15.0+cu134"),
                       *wheels("torch", "2.1.0+cu121"), *wheels("torch", "2.14.0+cpu")])
    report = run(manifests, mirrored(index))
    assert report.ok
    assert messages(report, NEW) == [
        "torch 2.15.0 is on https://download.pytorch.org/whl/cu130 (the torch manifest's newest release is 2.14)",
        "cu134 builds of torch (torch 2.15.0+cu134) are on https://download.pytorch.org/whl/cu134 (no torch build "
        "uses cu134)"]


TENSORFLOW = """
name: tensorflow
summary: TensorFlow from PyPI
framework: tensorflow
releases:
  - version: "2.20"
    python: ">=3.11,<3.14"
    builds:
      - variant: cu12
        cuda: "12.5"
        arch: {sass: ["6.0", "7.0"], ptx: ["9.0"]}
        pip: {packages: ["tensorflow[and-cuda]==2.20.*"]}
      - {variant: cpu, pip: {packages: ["tensorflow==2.20.*"]}}
"""


def test_a_newer_release_on_pypi_is_listed(manifests, index):
    (manifests / "tensorflow.yaml").write_text(TENSORFLOW)
    index.add("/pypi", [*wheels("tensorflow", "2.20.0"), *wheels("tensorflow", "2.21.0"),
                        *wheels("tensorflow", "2.22.0rc1")])  # a pre-release is not a release
    report = run(manifests, mirrored(index), build_ids=["tensorflow-2.20-cu12", "tensorflow-2.20-cpu"])
    assert report.ok
    assert messages(report, NEW) == [
        "tensorflow 2.21.0 is on https://pypi.org/simple (the tensorflow manifest's newest release is 2.20)"]
    assert index.count("/pypi/tensorflow/") == 1


@pytest.mark.parametrize("value, seconds", [("30", 30.0), ("²", None), ("１２", None), ("soon", None), (None, None)])
def test_a_retry_after_header_is_ascii_seconds_or_ignored(value, seconds):
    from envkit.maintain.fetch import _retry_after

    assert _retry_after(value) == seconds  # (float('²') would raise)


def test_a_wheel_tag_with_a_unicode_digit_does_not_fit():
    from envkit.backends.simple_index import _tag_fits

    assert _tag_fits("cp38", "abi3", "manylinux2014_x86_64", Version("3.12"))
    assert not _tag_fits("cp3²", "abi3", "manylinux2014_x86_64", Version("3.12"))  # (int('²') would raise)


def rendered(report) -> list[str]:
    from envkit.maintain.check import render_check

    lines: list[str] = []
    render_check(report, lines.append)
    return lines


def test_a_host_that_refuses_every_page_is_one_line_with_the_count_and_the_builds(manifests, index):
    """Not one line per page (251 identical ones on a real catalog): one per cause, its count and the builds."""
    import socket

    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    gone = Config(path=None, mirrors=(Mirror("https://download.pytorch.org/whl", f"http://127.0.0.1:{port}/whl"),))
    report = run(manifests, gone, settings=FetchSettings(timeout_s=0.5, retries=0, backoff_s=0.01, jobs=4))
    assert len(messages(report, UNREADABLE)) == 6  # each page of each build, in the JSON as before
    lines = rendered(report)
    cause = f"http://127.0.0.1:{port} could not be read (connection failed: 127.0.0.1 refused it (1 try))"
    assert lines[0] == f"{cause}: 6 checks could not be made, for 2 builds: torch-2.14-cu130, torch-2.14-cpu", lines
    assert not any("torch==2.14.* could not be checked" in line for line in lines)
    assert lines[-1].startswith("Some mirrors could not be read")


def test_a_mirror_that_fails_is_named_and_the_advice_is_about_the_mirror(manifests, index):
    complete_index(index)
    index.fail("/whl/cu130/torch/", 503, times=10)
    lines = rendered(run(manifests, mirrored(index)))
    assert f"  https://download.pytorch.org/whl/cu130 -> {index.url}/whl/cu130" in lines, lines
    assert any(line.startswith("Some mirrors could not be read: check that they are up") for line in lines), lines
    assert not any("map them to mirrors" in line for line in lines), lines  # they are mapped: that advice is wrong

    # a page read from its upstream URL, no mirror: the advice is about the network, and no mirror is listed
    from envkit.maintain.check import CheckReport
    from envkit.maintain.findings import Finding

    page = "https://download.pytorch.org/whl/cu130/torch/"
    report = CheckReport(builds=("torch-2.14-cu130",), pythons={"torch-2.14-cu130": ("3.12",)}, pages=1,
                         findings=(Finding(UNREADABLE, "torch-2.14-cu130: ...", "torch-2.14-cu130", page),),
                         mirrors={"https://download.pytorch.org/whl/cpu": f"{index.url}/whl/cpu"})
    lines = rendered(report)
    assert lines[-1].startswith("Some indexes or channels could not be read: check the network"), lines
    assert not any(line.startswith(("Read through", "Some mirrors")) for line in lines), lines


@pytest.mark.parametrize("build_ids", [["torch-2.14-cpu"], []])
def test_a_build_id_two_manifests_use_is_bad_input_not_one_of_them_checked(manifests, index, build_ids):
    (manifests / "other.yaml").write_text(
        "name: other\nsummary: s\nframework: torch\nreleases:\n  - version: '1.0'\n    python: '>=3.11,<3.14'\n"
        "    builds:\n      - {variant: cpu, id: torch-2.14-cpu, pip: {packages: [other==1.0]}}\n")
    with pytest.raises(BadInputError, match="the build id 'torch-2.14-cpu' is a build of other.yaml and torch.yaml: "
                                            "give one of them an id of its own"):
        run(manifests, mirrored(index), build_ids=build_ids)
    assert index.count("/whl/cpu/torch/") == 0  # nothing was asked


# --- issue 30: a companion without a wheel for a Python its build claims ------------------------------------------

TORCH_215 = """
name: torch
summary: "torch 2.15 as shipped, Python 3.11-3.15, torchaudio 2.11 (cp310-cp314 only) left out on 3.15"
framework: torch
pip:
  index_url: "https://download.pytorch.org/whl/{variant}"
releases:
  - version: "2.15"
    python: ">=3.11,<3.16"
    pip:
      packages: ["torch==2.15.*", PIN]
    builds:
      - {variant: cpu}
"""


@pytest.mark.parametrize("pin, missing", [
    ('"torchaudio==2.11.*"', True),
    ("'torchaudio==2.11.* ; python_version < \"3.15\"'", False),
])
def test_a_companion_missing_for_a_claimed_python_is_reported_unless_its_marker_leaves_it_out(
        envs_dir, tmp_path, index, pin, missing):
    """`pip index versions torchaudio --python-version 3.15 --only-binary=:all:` finds nothing (issue 30): on an index
    where torchaudio 2.11 has cp311-cp314 wheels and torch 2.15 cp311-cp315, a 2.15 build pinning torchaudio for
    every Python it claims is reported, as a companion; with the marker that leaves it out on 3.15, it passes."""
    from maintain_helpers import manifests_dir_with

    directory = manifests_dir_with(envs_dir, tmp_path / "m", "torch", TORCH_215.replace("PIN", pin))
    index.add("/whl/cpu", [*wheels("torch", "2.15.0+cpu", pythons=("311", "312", "313", "314", "315")),
                           *wheels("torchaudio", "2.11.0+cpu", pythons=("311", "312", "313", "314"))])
    report = run(directory, mirrored(index))
    assert report.pythons["torch-2.15-cpu"] == ("3.11", "3.12", "3.13", "3.14", "3.15")
    if missing:
        [message] = messages(report, MISSING)
        assert message.startswith("torch-2.15-cpu: no torchaudio wheel for Python 3.15 (torchaudio==2.11.* on "
                                  "https://download.pytorch.org/whl/cpu); it is not the build's framework but a "
                                  "companion of it")
    else:
        assert report.ok and messages(report, MISSING) == []


def test_an_index_page_redirected_off_loopback_to_plain_http_is_refused_and_said(tmp_path: Path):
    from envkit.maintain.fetch import PageFetcher
    from support.http_servers import directory_handler, serving

    asked: list[tuple[str, bool]] = []
    (tmp_path / "mirror" / "jax").mkdir(parents=True)
    (tmp_path / "mirror" / "jax" / "index.html").write_text("ok")
    moved = {"/simple/torch/": "http://203.0.113.9/simple/torch/", "/simple/jax/": "/mirror/jax/"}  # off, within
    with serving(directory_handler(tmp_path, redirect=moved.get, asked=asked)) as base, \
            PageFetcher(FetchSettings(timeout_s=5, retries=0)) as fetcher:
        refused = fetcher.fetch(f"{base}/simple/torch/")
        followed = fetcher.fetch(f"{base}/simple/jax/")
    assert refused.error == ("redirected to http://203.0.113.9/simple/torch/, which is neither https nor on loopback "
                             "or a configured mirror: refused") and not refused.found
    assert followed.status == 200 and followed.text == "ok" and followed.final_url == f"{base}/mirror/jax/"
    assert [path for path, _ in asked] == ["/simple/torch/", "/simple/jax/", "/mirror/jax/"]


def test_an_unconfirmed_build_whose_packages_are_all_there_is_said_to_be_listed(manifests, index):
    """Issue 46: an `unconfirmed:` build is not picked over a confirmed one until its note is gone; the check lists
    those whose every package it found (the cu130 one), and not one with a package missing (the cpu one)."""
    path = manifests / "torch.yaml"
    path.write_text(path.read_text().replace(
        '{variant: cu130, cuda: "13.0", arch: {sass: ["7.5", "8.0", "9.0"]}}',
        '{variant: cu130, cuda: "13.0", arch: {sass: ["7.5", "8.0", "9.0"]}, unconfirmed: "reported installed"}'
    ).replace("{variant: cpu}", '{variant: cpu, unconfirmed: "not seen"}'))
    complete_index(index, variants=("cu130",))
    index.add("/whl/cpu", [*wheels("torch", "2.14.0+cpu"), *wheels("torchvision", "0.29.1+cpu")])  # no torchaudio
    report = run(manifests, mirrored(index))
    [listed] = messages(report, LISTED)
    assert listed.startswith("torch-2.14-cu130: every package is there, but its manifest marks it unconfirmed "
                             "(reported installed): where the listing is what that doubted, remove the note")
    assert [f.build for f in report.findings if f.kind == MISSING] == ["torch-2.14-cpu"]
    assert report.to_dict()["listed_unconfirmed"][0]["build"] == "torch-2.14-cu130"
    lines = rendered(report)
    assert lines[lines.index("Listed, though marked unconfirmed:") + 1] == f"  {listed}"
