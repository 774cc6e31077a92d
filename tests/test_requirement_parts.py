"""The installer success check reads each package of a step (envkit.backends.installers.requirement_parts) as
packaging's Requirement does, without importing packaging.requirements for the plain ones: the same name, specifiers and
marker for every package of every shipped manifest, and for the odd ones; a bad one refused as Requirement
refuses it."""

from __future__ import annotations

import sys

import pytest
from packaging.requirements import InvalidRequirement, Requirement

from envkit.backends.installers import requirement_parts
from envkit.catalog import default_manifests_dir, load_catalog

ODD = ["torch", "torch==2.13.*", "torch == 2.13.* ", "jax[cuda12]==0.4.30", "torchaudio==2.11.*; python_version<'3.15'",
       "numpy>=1.21,<2", "mxnet-cu101==1.8.0.post0", "Foo.Bar_baz-1>=1.0", "x===1.0+local", "tf~=2.15.0",
       "pkg @ https://example.org/pkg-1.0-py3-none-any.whl", "a!=1.*,>=0.5", "name (>=1.0)"]


def _packages() -> list[str]:
    catalog = load_catalog(default_manifests_dir())
    found = {p for m in catalog.manifests.values() for b in m.builds if b.pip is not None for p in b.pip.packages}
    assert len(found) > 20  # the shipped manifests really were read
    return sorted(found)


@pytest.mark.parametrize("text", _packages() + ODD)
def test_read_as_requirement_reads_it(text: str):
    expected = Requirement(text)
    parts = requirement_parts(text)
    assert parts.name == expected.name
    assert str(parts.specifier) == str(expected.specifier)
    assert str(parts.marker) == str(expected.marker)


@pytest.mark.parametrize("text", ["torch==", "torch==2.13.*.1", "==1.0", "torch>=1.0;", "torch 1.0", "-e torch"])
def test_a_bad_one_is_refused_as_requirement_refuses_it(text: str):
    with pytest.raises(InvalidRequirement):
        Requirement(text)
    with pytest.raises(InvalidRequirement):
        requirement_parts(text)


def test_the_check_of_plain_ones_imports_neither_the_marker_grammar_nor_packaging_tags(tmp_path):
    import subprocess

    # (Some packaging releases, 26.2 among them, import packaging.tags with the specifiers themselves: then only the
    # grammar's absence can be asked.)
    alone = subprocess.run([sys.executable, "-c", "import sys, packaging.specifiers; print('packaging.tags' in "
                            "sys.modules)"], capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    forbidden = "{'packaging.requirements'}" if alone == "True" else "{'packaging.requirements', 'packaging.tags'}"

    site = tmp_path / "lib" / "python3.11" / "site-packages" / "Torch_Audio-2.11.0+cu126.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: Torch_Audio\nVersion: 2.11.0+cu126\n\n")
    code = ("import sys; from pathlib import Path; from envkit.backends.installers import wrong_builds; "
            "from envkit.backends.plan import PipPart; "
            "print(wrong_builds(Path(sys.argv[1]), PipPart('p', ('torch.audio==2.11.*', 'torch>=2'), 'u', "
            "local='cu126'))); print(sorted(" + forbidden + " & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["['torch is not installed']", "[]"], done.stderr
