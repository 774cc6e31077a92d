from __future__ import annotations

import pytest

from envkit.versions import ComputeCapability, CudaVersion, DriverVersion


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
