"""Knowing this machine: the system root, the driver and GPUs, every toolkit, doctor."""

from typing import TYPE_CHECKING

from cudaup.core.lazy import exports

if TYPE_CHECKING:
    from cudaup.machine.doctor import Report, doctor
    from cudaup.machine.driver_probe import detect_driver
    from cudaup.machine.toolkits import Lookup, Toolkit, find_toolkits

__all__ = ["Lookup", "Report", "Toolkit", "detect_driver", "doctor", "find_toolkits"]
# Every command that names a platform reads ``machine.host``: it must not pay for doctor.
__getattr__ = exports(
    __name__,
    {
        "Report": "cudaup.machine.doctor",
        "doctor": "cudaup.machine.doctor",
        "detect_driver": "cudaup.machine.driver_probe",
        "Lookup": "cudaup.machine.toolkits",
        "Toolkit": "cudaup.machine.toolkits",
        "find_toolkits": "cudaup.machine.toolkits",
    },
)
