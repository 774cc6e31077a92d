"""The pure parts of images: the SquashFS superblock's check, the fit and its digest, the mount table, what can be
relocated, and the Apptainer definition's text. (Apptainer is not in Debian's archive here: its definition file and
its exec line are tested as text; nothing runs Apptainer.)"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from envkit.errors import BadInputError
from envkit.state.records import Record
from envkit.travel.apptainer import base_of, definition, exec_argv, labels, sif_beside
from envkit.travel.image import (ImageError, check_beside, fit_document, fit_text, image_record, is_image_argument,
                                 parse_fit, squashfs_size)
from envkit.travel.mount import mount_points
from envkit.travel.pack import check_relocate

RECORD = Record(name="torch-a100", prefix="/home/ann/envs/torch-a100", kind="venv", backend="venv", manifest="torch",
                build="torch-2.14-cu126", python="3.12", created="2026-11-01T00:00:00+00:00",
                machine={"name": "node", "driver_version": "550.54.14"}, on_target=True,
                verify={"ok": True, "time": "2026-11-02T00:00:00+00:00", "node": "gpu-a1"},
                target={"options": ["--partition", "gpu"], "machines": ["gpu-a1", "gpu-a2"], "profiles": []})


def superblock(major: int = 4, used: int = 8192) -> bytes:
    return struct.pack("<4sIIIIHHHHHHQQ", b"hsqs", 10, 0, 131072, 1, 6, 17, 0, 1, major, 0, 0, used) + bytes(16)


def fit(**changes) -> dict:
    data = fit_document(RECORD, "/sw/torch", ("conda-lock.yml", "version: 1\n"), "0.1.0", "2026-11-28T00:00:00+00:00",
                        "x86_64", [("pip", "torch", "2.14.0+cu126"), ("conda", "python", "3.12.7")])
    data.update(changes)
    return data


def test_the_superblock_tells_an_image_from_what_is_not_one_and_a_truncated_one():
    assert squashfs_size(superblock(used=8192), 8192, "a.sqfs") == 8192
    with pytest.raises(ImageError, match="a.sqfs is not a SquashFS image"):
        squashfs_size(b"PK\x03\x04" + bytes(100), 4096, "a.sqfs")
    with pytest.raises(ImageError, match="not a SquashFS image"):
        squashfs_size(b"hsq", 3, "a.sqfs")
    with pytest.raises(ImageError, match=r"a.sqfs is truncated: 4,096 of its 8,192 bytes are there"):
        squashfs_size(superblock(used=8192), 4096, "a.sqfs")
    with pytest.raises(ImageError, match="SquashFS version 3"):
        squashfs_size(superblock(major=3), 8192, "a.sqfs")


def test_the_fit_records_what_the_environment_is_and_fits_and_reads_back_as_written():
    written = fit()
    assert written["prefix"] == "/sw/torch" and written["record"]["prefix"] == "/sw/torch"
    assert written["made_for"]["machines"] == ["gpu-a1", "gpu-a2"]
    assert written["checked"]["node"] == "gpu-a1" and written["lock"] == {"name": "conda-lock.yml",
                                                                          "text": "version: 1\n"}
    assert written["packages"] == [["pip", "torch", "2.14.0+cu126"], ["conda", "python", "3.12.7"]]
    assert parse_fit(fit_text(written), "x.sqfs") == written
    record = image_record(written, Path("/data/x.sqfs"))
    assert record.prefix == "/sw/torch" and record.extra["image"] == "/data/x.sqfs" and record.build == RECORD.build
    # an environment made on its machine records that machine
    assert fit_document(RECORD.__class__(**{**RECORD.to_dict(), "target": None}), "/p", None, "0", "t",
                        "x86_64")["made_for"] == {"machine": RECORD.machine}


@pytest.mark.parametrize("text,said", [
    (None, "records no fit"),
    ("{not json", "is not JSON"),
    (json.dumps({"format": "other"}), "is not an envkit image's"),
    (json.dumps({**fit(), "build": "torch-2.14-cu130"}), "was altered"),
    (json.dumps({**fit(), "version": 99}), "of version 99"),
])
def test_a_missing_foreign_or_altered_fit_is_refused(text, said):
    with pytest.raises(ImageError, match=said) as caught:
        parse_fit(text, "x.sqfs")
    assert caught.value.exit_code == 2


def test_a_fit_whose_prefix_is_not_usable_is_refused_even_with_a_matching_digest():
    from envkit.travel.image import digest

    bad = fit(prefix="relative/path")
    bad["digest"] = digest(bad)
    with pytest.raises(ImageError, match="no usable path"):
        parse_fit(json.dumps(bad), "x.sqfs")


def test_the_fit_beside_must_be_the_one_inside():
    inside = fit()
    check_beside(inside, None, Path("/d/x.sqfs"))  # none beside: the inside one alone
    check_beside(inside, fit_text(inside), Path("/d/x.sqfs"))
    other = fit(packed="2026-12-01T00:00:00+00:00")
    from envkit.travel.image import digest

    other["digest"] = digest(other)  # a whole, self-consistent fit, but another
    with pytest.raises(ImageError, match="differs from the one inside it"):
        check_beside(inside, fit_text(other), Path("/d/x.sqfs"))
    with pytest.raises(ImageError, match=r"was altered .*\(beside the image\)"):
        check_beside(inside, fit_text({**inside, "python": "3.9"}), Path("/d/x.sqfs"))


def test_an_image_is_named_as_a_path_or_by_its_suffix():
    assert is_image_argument("./torch.sqfs") and is_image_argument("/sw/x") and is_image_argument("t.squashfs")
    assert not is_image_argument("torch-cu126") and not is_image_argument("site:torch")


def test_the_mount_table_is_read_with_its_escapes():
    table = ("36 35 98:0 / /mnt/a\\040b rw - fuse.squashfuse squashfuse ro\n"
             "37 35 98:0 / /sw/torch rw - fuse.squashfuse squashfuse ro\n")
    assert mount_points(table) == {"/mnt/a b", "/sw/torch"}


def test_the_packages_installed_are_read_from_conda_meta_and_dist_info(tmp_path):
    from envkit.travel.pack import installed

    (tmp_path / "conda-meta").mkdir()
    (tmp_path / "conda-meta" / "cuda-nvrtc-12.6.77-h5888daf_0.json").write_text("{}")
    dist = tmp_path / "lib" / "python3.12" / "site-packages" / "torch-2.14.0+cu126.dist-info"
    dist.mkdir(parents=True)
    (dist / "INSTALLER").write_text("uv\n")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.14.0+cu126\n")
    assert installed(tmp_path) == [("conda", "cuda-nvrtc", "12.6.77"), ("pip", "torch", "2.14.0+cu126")]


def test_only_a_venv_is_relocated_and_only_to_an_absolute_path():
    assert check_relocate(RECORD, None) is None
    assert check_relocate(RECORD, Path("/sw/torch/")) == "/sw/torch"
    with pytest.raises(BadInputError, match="conda environment"):
        check_relocate(RECORD.__class__(**{**RECORD.to_dict(), "kind": "conda"}), Path("/sw/torch"))
    for bad in ("relative", "/", "/a/../"):
        with pytest.raises(BadInputError, match="absolute path"):
            check_relocate(RECORD, Path(bad))


def test_the_apptainer_definition_builds_a_sif_holding_the_environment_with_its_fit_as_labels():
    written = fit()
    text = definition(written, Path("/data/torch a100.sqfs"), "debian:12", "venv")
    assert "Bootstrap: docker\nFrom: debian:12\n" in text
    assert "unsquashfs -f -d \"${APPTAINER_ROOTFS}\"/sw/torch '/data/torch a100.sqfs'" in text
    assert "export PATH=/sw/torch/bin:\"$PATH\"" in text and "export VIRTUAL_ENV=/sw/torch" in text
    shown = dict(labels(written))
    assert shown["envkit.build"] == "torch-2.14-cu126" and shown["envkit.made-for"] == "gpu-a1, gpu-a2"
    assert shown["envkit.checked"] == "PASS 2026-11-02T00:00:00+00:00"
    assert f'    envkit.fit-digest "{written["digest"]}"' in text
    assert "export CONDA_PREFIX=/sw/torch" in definition(written, Path("/d/t.sqfs"), "debian:12", "conda")


def test_the_apptainer_line_uses_the_gpus_and_binds_the_image_at_its_path():
    assert exec_argv("/usr/bin/apptainer", Path("/d/t.sqfs"), "/sw/torch", Path("/d/t.sif"), ["python", "-V"]) == [
        "/usr/bin/apptainer", "exec", "--nv", "--bind", "/d/t.sqfs:/sw/torch:image-src=/,ro", "/d/t.sif", "python",
        "-V"]
    assert sif_beside(Path("/d/torch.sqfs")) == Path("/d/torch.sif")


def test_the_base_system_comes_from_os_release():
    assert base_of('ID=debian\nVERSION_ID="12"\n') == "debian:12"
    assert base_of('ID="rocky"\nVERSION_ID="9.3"\n') == "rockylinux:9.3"
    assert base_of("ID=plan9\nVERSION_ID=4\n") is None
