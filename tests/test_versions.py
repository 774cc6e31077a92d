from __future__ import annotations

import pytest

from envkit.versions import (ComputeCapability, CudaVersion, DriverVersion, is_ascii_number, is_solve_cuda,
                             read_as_number)


@pytest.mark.parametrize("value, expected", [(12040, (12, 4)), (11020, (11, 2)), (13000, (13, 0)), (12080, (12, 8))])
def test_cuda_from_nvml_integer(value, expected):
    assert CudaVersion.from_driver_int(value) == expected


@pytest.mark.parametrize("text", ["12", "12.4.1", "cu126", "", "twelve"])
def test_bad_cuda_versions(text):
    with pytest.raises(ValueError, match="not a CUDA version"):
        CudaVersion.parse(text)


def test_cuda_versions_order_numerically():
    assert CudaVersion.parse("12.10") > CudaVersion.parse("12.9")
    assert CudaVersion.parse("12.6").tag == "cu126"


@pytest.mark.parametrize("text, expected", [("7.5", (7, 5)), ("sm_75", (7, 5)), ("sm_120", (12, 0)),
                                            ("compute_90", (9, 0)), (8.6, (8, 6)), ("10.3", (10, 3))])
def test_compute_capability_forms(text, expected):
    assert ComputeCapability.parse(text) == expected


@pytest.mark.parametrize("text", ["7", "sm7", "ampere", "", True])
def test_bad_compute_capabilities(text):
    with pytest.raises(ValueError):
        ComputeCapability.parse(text)


def test_compute_capability_names():
    assert ComputeCapability(12, 0).sm == "sm_120"
    assert ComputeCapability(9, 0).compute == "compute_90"


def test_driver_versions_compare_by_number():
    assert DriverVersion.parse("580") < DriverVersion.parse("580.65.06")
    assert DriverVersion.parse("580.0") == DriverVersion.parse("580")
    assert DriverVersion.parse("450.80.02") > DriverVersion.parse("450.51.05")
    assert DriverVersion.parse("535.104.05") > DriverVersion.parse("535.54.03")  # 104 > 54, not text order
    assert str(DriverVersion.parse("535.54.03")) == "535.54.03"
    with pytest.raises(ValueError):
        DriverVersion.parse("535.x")


@pytest.mark.parametrize("parse, text", [
    (CudaVersion.parse, "１２.４"),             # fullwidth digits: \d would take them
    (CudaVersion.parse, "١٢.٤"),               # Arabic-Indic digits
    (ComputeCapability.parse, "８.0"),
    (ComputeCapability.parse, "sm_٨٠"),
    (DriverVersion.parse, "５３５.54.03"),
])
def test_only_ascii_digits_make_a_version(parse, text):
    with pytest.raises(ValueError, match="is not a"):
        parse(text)


@pytest.mark.parametrize("parse, text, words", [
    (CudaVersion.parse, "99999999999999999999.0", "not a CUDA version"),
    (CudaVersion.parse, "12.4444", "not a CUDA version"),
    (CudaVersion.parse, "99999999999999999999999.4", "not a CUDA version"),
    (ComputeCapability.parse, "999999999999999999999.0", "not a compute capability"),
    (ComputeCapability.parse, "99999999999.9", "not a compute capability"),
    (ComputeCapability.parse, "8.10", "not a compute capability"),  # sm_810 would read back as 81.0
    (ComputeCapability.parse, "sm_99999999999", "not a compute capability"),
    (DriverVersion.parse, "99999999999999999999999.4", "not an NVIDIA driver version"),
    (DriverVersion.parse, "535.54.03.01", "not an NVIDIA driver version"),
    (DriverVersion.parse, "5.1", "not an NVIDIA driver version"),
    (DriverVersion.parse, "535.1234", "not an NVIDIA driver version"),
])
def test_absurdly_large_numbers_are_not_versions(parse, text, words):
    with pytest.raises(ValueError, match=words):
        parse(text)


@pytest.mark.parametrize("text", ["580.159.04", "470.256.02", "390.157", "418.87.00", "580", "96.43.23"])
def test_real_driver_versions_still_parse(text):
    assert str(DriverVersion.parse(text)) == text


def test_the_largest_versions_each_type_takes():
    assert CudaVersion.parse("999.999") == (999, 999)
    assert ComputeCapability.parse("100.5") == (100, 5) and ComputeCapability.parse("sm_1005") == (100, 5)


@pytest.mark.parametrize("value", [0, -12040, 10 ** 20, True, "12040"])
def test_a_cuda_driver_number_out_of_range_is_refused(value):
    with pytest.raises(ValueError, match="not a CUDA driver version number"):
        CudaVersion.from_driver_int(value)


def test_ascii_numbers_are_ascii_digits_and_nothing_else():
    # The one spelling of the check that GPU indexes, GRES counts, wheel tags, pids and Retry-After headers share.
    assert [is_ascii_number(text) for text in ("0", "12", "0012")] == [True, True, True]
    assert not any(is_ascii_number(text) for text in ("", "²", "１２", "-1", "+1", " 1", "1 ", "1.0", "1_0", "٣"))


def test_a_number_from_yaml_is_what_read_as_number_speaks_of():
    assert [read_as_number(value) for value in ("12.10", True, False, None)] == [None, None, None, None]
    assert read_as_number(550) == "unquoted, YAML reads it as a number (and 12.10 as 12.1)"


def test_a_cuda_for_the_solve_is_what_conda_takes_from_conda_override_cuda():
    # One check for $CONDA_OVERRIDE_CUDA (envkit.backends.plan) and for a lock's envkit.cuda_driver, which records it.
    assert all(is_solve_cuda(text) for text in ("12", "12.4", "12.4.1", "11.8", "999.999.999"))
    assert not any(is_solve_cuda(text) for text in ("", "12.", ".4", "12.4.1.7", " 12.4", "12.4 ", "１２.４", "1234",
                                                      "12.4a", "-x", "sm_80"))
