"""On a machine with an NVIDIA driver: ``cudaup upgrade``'s GPU step, for real.

Runs the verifier's default kernel (through torch, or cupy) in the interpreter given,
then a script that fails on the GPU, which must be refused with exit code 19.

    python3 scripts/gpu/upgrade_gpu_check.py /path/to/venv/bin/python
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cudaup.errors import VerificationFailedError
from cudaup.machine.driver_probe import detect_driver
from cudaup.machine.sysroot import SystemRoot
from cudaup.upgrade.environment import read_environment
from cudaup.upgrade.families import load_families
from cudaup.upgrade.verify import Verifier

FAILING = "import sys, torch; torch.zeros(1, device='cuda'); sys.exit(5)"


def main() -> int:
    python = Path(sys.argv[1])
    driver = detect_driver(root=SystemRoot.from_env(), env=os.environ)
    print(
        "driver:", driver.version, driver.source, driver.cuda_version, [g.name for g in driver.gpus]
    )
    environment = read_environment(str(python))
    families = load_families()
    check = Verifier(driver)._gpu(python, environment, families)
    print("default kernel:", check.step, check.status, check.detail)
    try:
        Verifier(driver, gpu_script=FAILING)._gpu(python, environment, families)
    except VerificationFailedError as exc:
        print("failing script refused:", exc.exit_code, exc.step, exc.package, exc)
        return 0 if check.status == "ok" else 1
    print("failing script: NOT refused")
    return 1


if __name__ == "__main__":
    sys.exit(main())
