# Copyright: cudaup developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Ansible module: what ``cudaup doctor`` finds on a host, as facts."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cudaup_facts
short_description: The driver, GPUs, CUDA toolkits and problems cudaup doctor finds, as facts
version_added: "0.1.0"
description:
  - Runs C(cudaup doctor --json) on the managed host and returns its report as the fact
    C(cudaup) (C(ansible_facts.cudaup)).
  - The report holds the driver (version, the CUDA it runs, how it was found), the GPUs
    (name, memory, compute capability), every toolkit found (the cudaup store,
    C(/usr/local/cuda*), packages, C(CUDA_HOME), C(nvcc) on C(PATH), wheels, conda) with
    the release each one is, and the problems found with their fixes.
  - Changes nothing on the host.
options:
  driver:
    description:
      - Assume this driver version instead of detecting one (C(--driver)), for build hosts
        and GPU-less containers.
    type: str
  python:
    description:
      - The Python whose pip-installed C(nvidia-*) wheels and torch to examine
        (C(--python)); default the C(python3) on C(PATH).
    type: str
  executable:
    description:
      - The C(cudaup) program; a name is looked up on C(PATH) and in C(~/.local/bin).
    type: str
    default: cudaup
  cudaup_home:
    description:
      - The cudaup store to examine (sets C(CUDAUP_HOME)); default cudaup's own.
    type: path
  env:
    description:
      - Extra environment for cudaup, such as C(CUDAUP_DRIVER_VERSION) or
        C(CUDAUP_SYSTEM_ROOT).
    type: dict
    default: {}
attributes:
  check_mode:
    description: Runs in check mode too; it only reads.
    support: full
  diff_mode:
    description: Nothing changes, so there is nothing to show.
    support: none
  facts:
    description: Sets the fact C(cudaup).
    support: full
requirements:
  - cudaup installed on the managed host.
seealso:
  - module: cudaup.toolkit.cudaup_toolkit
author:
  - cudaup developers (@cudaup)
"""

EXAMPLES = r"""
- name: What the GPU hosts have
  cudaup.toolkit.cudaup_facts:

- name: Hosts whose driver cannot run CUDA 13
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }}: driver {{ cudaup.driver.version }} runs CUDA {{ cudaup.driver_cuda }}"
  when: cudaup.driver_cuda is not none and cudaup.driver_cuda is version('13.0', '<')

- name: A build host without a GPU, checked as if it had the fleet's driver
  cudaup.toolkit.cudaup_facts:
    driver: 580.82.07
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    cudaup:
      description:
        - What C(cudaup doctor --json) printed; its keys include C(driver), C(driver_cuda),
          C(gpus), C(toolkits) and C(problems).
      returned: always
      type: dict
      sample:
        schema: 1
        driver:
          found: true
          version: 580.82.07
          cuda_version: "13.0"
        driver_cuda: "13.0"
        gpus: [{name: NVIDIA H100 80GB HBM3, memory_mib: 81559, compute_capability: "9.0"}]
        toolkits: [{path: /usr/local/cuda-12.8, owner: dpkg}]
        problems: []
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cudaup.toolkit.plugins.module_utils.cudaup_cli import (
    COMMON_ARGUMENT_SPEC,
    Cudaup,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **COMMON_ARGUMENT_SPEC,
            "driver": {"type": "str"},
            "python": {"type": "str"},
        },
        supports_check_mode=True,
    )
    args = ["doctor"]
    if module.params["driver"]:
        args += ["--driver", str(module.params["driver"])]
    if module.params["python"]:
        args += ["--python", str(module.params["python"])]
    report: dict[str, Any] = Cudaup(module).run(*args)
    module.exit_json(changed=False, ansible_facts={"cudaup": report})


if __name__ == "__main__":
    main()
