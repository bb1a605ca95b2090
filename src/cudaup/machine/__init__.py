"""Knowing this machine: the system root, the driver and GPUs, every toolkit, doctor."""

from cudaup.machine.doctor import Report, doctor
from cudaup.machine.driver_probe import detect_driver
from cudaup.machine.toolkits import Lookup, Toolkit, find_toolkits

__all__ = ["Lookup", "Report", "Toolkit", "detect_driver", "doctor", "find_toolkits"]
