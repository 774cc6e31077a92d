"""`manifests check` on conda builds: a real local channel (indexed by py-rattler) behind a file:// mirror."""

from __future__ import annotations

from maintain_helpers import manifests  # noqa: F401 (a fixture)

from envkit.catalog import load_catalog
from envkit.maintain.check import MISSING, UNREADABLE, check_builds, render_check
from envkit.maintain.fetch import FetchSettings
from envkit.state.config import Config, Mirror
from support.conda_channel import build_package, index_channel

LEGACY = """
name: legacy
summary: TensorFlow 2.4 from a conda channel
framework: tensorflow
releases:
  - version: "2.4.1"
    python: ">=3.7,<3.9"
    builds:
      - variant: cu101
        cuda: "10.1"
        arch: {sass: ["6.0", "7.0"]}
        conda:
          channels: ["https://conda.anaconda.org/test-channel"]
          packages: ["tensorflow-gpu=2.4.1", "cudatoolkit=10.1", "cudnn=7.6"]
"""


def test_a_conda_channel_missing_a_spec_and_a_python(manifests, tmp_path):
    (manifests / "legacy.yaml").write_text(LEGACY)
    channel = tmp_path / "channel"
    build_package(channel, "tensorflow-gpu", "2.4.1", build="py38_0", depends=["python >=3.8,<3.9.0a0"])
    build_package(channel, "cudatoolkit", "10.1.243", build="0")
    build_package(channel, "cudnn", "8.0.5", build="0")  # not the 7.6 the build asks for
    index_channel(channel)
    config = Config(path=None, mirrors=(Mirror("https://conda.anaconda.org/test-channel", channel.as_uri()),))
    report = check_builds(load_catalog(manifests), config, build_ids=["legacy-2.4.1-cu101"],
                          settings=FetchSettings(timeout_s=5, retries=0))
    assert [f.message for f in report.findings if f.kind == MISSING] == [
        "legacy-2.4.1-cu101: no conda package tensorflow-gpu=2.4.1 for Python 3.7 in "
        "https://conda.anaconda.org/test-channel",
        "legacy-2.4.1-cu101: conda package cudnn=7.6 has no match in https://conda.anaconda.org/test-channel for "
        "linux-64",
    ]
    assert report.channels == 1 and not report.ok
    lines: list[str] = []
    render_check(report, lines.append)
    assert "Checked 1 build (2 build-Python pairs, 0 index pages, 1 channel query): 2 problems." in lines, lines


def test_a_complete_conda_channel_passes(manifests, tmp_path):
    (manifests / "legacy.yaml").write_text(LEGACY)
    channel = tmp_path / "channel"
    for python in ("37", "38"):
        build_package(channel, "tensorflow-gpu", "2.4.1", build=f"py{python}_0",
                      depends=[f"python >={python[0]}.{python[1:]},<{python[0]}.{int(python[1:]) + 1}.0a0"])
    build_package(channel, "cudatoolkit", "10.1.243", build="0")
    build_package(channel, "cudnn", "7.6.5", build="0")
    index_channel(channel)
    config = Config(path=None, mirrors=(Mirror("https://conda.anaconda.org/test-channel", channel.as_uri()),))
    report = check_builds(load_catalog(manifests), config, build_ids=["legacy-2.4.1-cu101"])
    assert report.ok and report.findings == ()


def test_an_unreadable_channel_is_reported(manifests, tmp_path):
    (manifests / "legacy.yaml").write_text(LEGACY)
    config = Config(path=None, mirrors=(Mirror("https://conda.anaconda.org/test-channel",
                                               (tmp_path / "nowhere").as_uri()),))
    report = check_builds(load_catalog(manifests), config, build_ids=["legacy-2.4.1-cu101"])
    unreadable = [f.message for f in report.findings if f.kind == UNREADABLE]
    assert len(unreadable) == 1 and unreadable[0].startswith("legacy-2.4.1-cu101: its conda channels could not be read")


def test_an_unreadable_channel_names_the_channel_its_mirror_and_why(manifests, tmp_path):
    (manifests / "legacy.yaml").write_text(LEGACY)
    nowhere = (tmp_path / "nowhere").as_uri()
    config = Config(path=None, mirrors=(Mirror("https://conda.anaconda.org/test-channel", nowhere),))
    report = check_builds(load_catalog(manifests), config, build_ids=["legacy-2.4.1-cu101"])
    [message] = [f.message for f in report.findings if f.kind == UNREADABLE]
    assert message.startswith("legacy-2.4.1-cu101: its conda channels could not be read (https://conda.anaconda.org/"
                              f"test-channel, read from {nowhere}): "), message
    assert message.endswith("No such file or directory (os error 2)"), message  # the root cause, not only a wrapper


def test_a_channel_whose_repodata_redirects_off_loopback_to_plain_http_is_refused(manifests, tmp_path):
    """py-rattler runs in envkit's process; the plain-http guard (envkit.system.egress) holds it to the transport
    rule."""
    from support.http_servers import directory_handler, serving

    (manifests / "legacy.yaml").write_text(LEGACY)
    with serving(directory_handler(tmp_path, redirect=lambda path: f"http://203.0.113.9{path}")) as url:
        config = Config(path=None, mirrors=(Mirror("https://conda.anaconda.org/test-channel", f"{url}/c"),))
        report = check_builds(load_catalog(manifests), config, build_ids=["legacy-2.4.1-cu101"],
                              settings=FetchSettings(timeout_s=5, retries=0))
    [finding] = [f for f in report.findings if f.kind == UNREADABLE]
    assert "the conda engine was sent to http://203.0.113.9/c/" in finding.message and "refused" in finding.message


def test_a_conda_build_on_two_platforms_is_looked_for_in_both_subdirs(manifests, tmp_path):
    """Issue 43: a conda build that lists linux-aarch64 needs its packages in the channel's linux-aarch64 (or noarch)
    subdir too: the x86_64 ones alone are a finding naming the platform."""
    (manifests / "legacy.yaml").write_text(LEGACY.replace('        cuda: "10.1"\n', '        cuda: "10.1"\n'
                                                          '        platforms: [linux-64, linux-aarch64]\n'))
    channel = tmp_path / "channel"
    for python in ("37", "38"):
        build_package(channel, "tensorflow-gpu", "2.4.1", build=f"py{python}_0",
                      depends=[f"python >={python[0]}.{python[1:]},<{python[0]}.{int(python[1:]) + 1}.0a0"])
    build_package(channel, "cudatoolkit", "10.1.243", build="0")
    build_package(channel, "cudnn", "7.6.5", build="0", subdir="linux-aarch64")
    build_package(channel, "cudnn", "7.6.5", build="0")
    index_channel(channel)
    config = Config(path=None, mirrors=(Mirror("https://conda.anaconda.org/test-channel", channel.as_uri()),))
    report = check_builds(load_catalog(manifests), config, build_ids=["legacy-2.4.1-cu101"],
                          settings=FetchSettings(timeout_s=5, retries=0))
    assert [f.message for f in report.findings if f.kind == MISSING] == [
        f"legacy-2.4.1-cu101: conda package {spec} has no match in https://conda.anaconda.org/test-channel for "
        "linux-aarch64" for spec in ("tensorflow-gpu=2.4.1", "cudatoolkit=10.1")]
