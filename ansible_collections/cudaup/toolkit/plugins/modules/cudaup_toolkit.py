# Copyright: cudaup developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Ansible module: CUDA toolkits installed, removed and made default through cudaup."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cudaup_toolkit
short_description: Install, remove and select CUDA toolkits with cudaup
version_added: "0.1.0"
description:
  - Manages the CUDA toolkits in a cudaup store (C($CUDAUP_HOME)) on the managed host by
    running the C(cudaup) command line there (C(cudaup list), C(install), C(uninstall),
    C(default), all with C(--json)).
  - Reads C(cudaup list --json) first and changes only what differs, so a second run with
    the same parameters reports no change.
  - Installs are atomic and verified by cudaup itself (sha256 or md5 of every file);
    a failure leaves no partial toolkit and any earlier install intact.
  - cudaup installs toolkits, never GPU drivers, and needs no root for its own store.
options:
  version:
    description:
      - The CUDA release, such as C(13.0.1).
      - An exact C(X.Y.Z) release makes the check exact and cheap; a line such as
        C(13.0) (the newest patch) or C(cu130) is resolved by cudaup when installing,
        which reports whether anything was added.
      - With I(state=absent), C(13.0) removes every installed 13.0.x.
    type: str
  lock:
    description:
      - A C(cuda.lock.toml) (written by C(cudaup lock)) on the managed host; copy it there
        first, for example with M(ansible.builtin.copy). Installs exactly what it pins for
        the platform with C(cudaup install --lock).
      - The release and components the lock pins for the platform decide whether anything
        is missing. If the lock cannot be read (it is not there yet in check mode, or it
        pins nothing for this host), C(cudaup install --lock) decides; it adds nothing that
        is already installed.
    type: path
  mirror:
    description:
      - The root URL of a cudaup mirror (C(cudaup mirror) writes one), passed as
        C(--mirror); NVIDIA's hosts and the PyPI index are all read from there. With
        I(lock), every locked file comes from the mirror.
    type: str
  channel:
    description:
      - Where the files come from; C(auto) uses C(redist) when NVIDIA's host answers,
        else C(pypi).
      - With C(auto), a toolkit already installed from any channel satisfies the request;
        with an explicit channel, one from another channel is installed again.
      - Ignored with I(lock) (the lock says).
    type: str
    choices: [auto, installer, redist, pypi]
    default: auto
  components:
    description:
      - Components to install, as cudaup's aliases (C(nvcc), C(cudart), C(cublas)) or
        NVIDIA's names (C(cuda_nvcc)); C(nvcc) brings what compiling needs.
      - NVIDIA's libraries (C(cudnn), C(nccl), C(cusparselt), C(cutensor), C(nvshmem)) take
        their own version as a prefix pin (C(cudnn==9.27)); an installed build under the pin
        (its version in C(cudaup list --json)'s C(libraries)) satisfies it.
      - Required by the C(redist) and C(pypi) channels; an installed toolkit that lacks
        one of them gets it added.
    type: list
    elements: str
  platform:
    description:
      - The Linux platform to install for (C(linux-x86_64), C(linux-sbsa),
        C(linux-aarch64)); default is the managed host's.
    type: str
  force:
    description:
      - Install even if the driver cannot run the toolkit (C(--force)).
    type: bool
    default: false
  state:
    description:
      - C(present) installs the toolkit (or the missing components); C(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  default:
    description:
      - Make this toolkit cudaup's default (C(cudaup default VERSION)), the one the C(nvcc)
        shims run where no C(.cuda-version) or C(CUDAUP_TOOLKIT) chooses another.
      - C(false) leaves the default as it is. Ignored with I(state=absent) (removing the
        default toolkit clears the default).
    type: bool
    default: false
  executable:
    description:
      - The C(cudaup) program; a name is looked up on C(PATH) and in C(~/.local/bin).
    type: str
    default: cudaup
  cudaup_home:
    description:
      - The cudaup store to manage (sets C(CUDAUP_HOME)); default cudaup's own
        (the user data directory).
    type: path
  env:
    description:
      - Extra environment for cudaup, such as C(CUDAUP_NVIDIA_DOWNLOAD_URL) for a mirror,
        C(CUDAUP_CACHE_DIR), C(HTTPS_PROXY) or C(CUDAUP_DRIVER_VERSION).
    type: dict
    default: {}
attributes:
  check_mode:
    description: Reports what would change without installing, removing or switching.
    support: full
  diff_mode:
    description: >-
      Shows the installed toolkits (version, channel, components) and the default before
      and after; predicted in check mode.
    support: full
notes:
  - In check mode a line such as C(13.0) is resolved with C(cudaup resolve) (read-only,
    needs the download host) to know which release would be installed.
  - Errors are cudaup's own one-line messages, with its exit status in C(rc).
requirements:
  - cudaup installed on the managed host; Python 3.11 or later there to read
    lock files.
seealso:
  - module: cudaup.toolkit.cudaup_facts
author:
  - cudaup developers (@cudaup)
"""

EXAMPLES = r"""
- name: CUDA 13.0.1's compiler, from NVIDIA's redist archives, as the default toolkit
  cudaup.toolkit.cudaup_toolkit:
    version: 13.0.1
    channel: redist
    components: [nvcc, cudart]
    default: true

- name: Exactly what the fleet's lock pins, from the site mirror
  cudaup.toolkit.cudaup_toolkit:
    lock: /etc/cudaup/cuda.lock.toml
    mirror: http://mirror.example.internal/nvidia
    default: true

- name: A store of its own, in a service account's home, through a proxy
  cudaup.toolkit.cudaup_toolkit:
    version: 12.8.1
    components: [nvcc]
    cudaup_home: /srv/ci/cudaup
    env:
      HTTPS_PROXY: http://proxy.example.internal:3128

- name: No CUDA 12.8.x any more
  cudaup.toolkit.cudaup_toolkit:
    version: "12.8"
    state: absent
"""

RETURN = r"""
toolkit:
  description:
    - What C(cudaup install --json) printed (C(skipped) is true when nothing was added), or
      the matching installed toolkit when no install was needed.
    - C(null) in check mode when the toolkit would be installed, and with I(state=absent).
  returned: success
  type: dict
  sample:
    schema: 1
    version: 13.0.1
    path: /home/ci/.local/share/cudaup/toolkits/13.0.1
    channel: redist
    components: [cuda_cudart, cuda_nvcc]
    skipped: false
    notes: ["lib64 -> lib"]
installed:
  description: The toolkits cudaup has installed afterwards (C(cudaup list --json)'s C(installed)).
  returned: success
  type: list
  elements: dict
  sample:
    - version: 13.0.1
      path: /home/ci/.local/share/cudaup/toolkits/13.0.1
      components: [cuda_cudart, cuda_nvcc]
      channel: redist
      default: true
default:
  description: cudaup's default afterwards (a version request or a toolkit path), or C(null).
  returned: success
  type: str
  sample: 13.0.1
removed:
  description: The releases removed (with I(state=absent)); in check mode, those that would be.
  returned: success
  type: list
  elements: str
  sample: [12.8.1]
commands:
  description: The cudaup commands that changed something; in check mode, those that would run.
  returned: success
  type: list
  elements: str
  sample: ["cudaup install 13.0.1 --channel redist --components nvcc --json"]
"""

import shlex
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cudaup.toolkit.plugins.module_utils.cudaup_cli import (
    COMMON_ARGUMENT_SPEC,
    EXACT_RELEASE,
    Cudaup,
    component_request,
    fail,
    install_args,
    library_satisfied,
    line_prefix,
    matches,
    read_lock,
)


def _version_key(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return ()


def _entry(toolkit: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": toolkit.get("version"),
        "channel": toolkit.get("channel"),
        "components": sorted(toolkit.get("components") or []),
    }


def _state(installed: list[dict[str, Any]], default: Any) -> dict[str, Any]:
    """The part of the store a diff shows: toolkits (newest first) and the default."""
    entries = sorted(
        (_entry(t) for t in installed),
        key=lambda e: _version_key(str(e["version"])),
        reverse=True,
    )
    return {"installed": entries, "default": default}


def _resolve_release(cudaup: Cudaup, params: dict[str, Any]) -> str | None:
    """The release ``cudaup install VERSION`` would pick (read-only; ``None`` if unknown)."""
    channel = params["channel"] if params["channel"] != "auto" else "redist"
    args = ["resolve", str(params["version"]), "--no-probe", "--channel", channel]
    if params["platform"]:
        args += ["--platform", params["platform"]]
    if params["mirror"]:
        args += ["--mirror", params["mirror"]]
    document = cudaup.try_run(*args)
    release = (document or {}).get("release")
    version = release.get("version") if isinstance(release, dict) else None
    return version if isinstance(version, str) else None


class Run:
    """One module run: the store before, what to do, and what it becomes."""

    def __init__(self, module: Any, cudaup: Cudaup) -> None:
        self.module = module
        self.params: dict[str, Any] = module.params
        self.cudaup = cudaup
        self.check = bool(module.check_mode)
        listing = cudaup.run("list")
        self.installed: list[dict[str, Any]] = list(listing.get("installed") or [])
        self.default: Any = listing.get("default")
        self.before = _state(self.installed, self.default)
        # the predicted store after the run (check mode); replaced by a fresh list otherwise
        self.after_installed = [dict(t) for t in self.installed]
        self.after_default = self.default
        self.changed = False
        self.toolkit: dict[str, Any] | None = None
        self.removed: list[str] = []
        self.commands: list[str] = []

    # -- helpers ---------------------------------------------------------------------
    def change(self, *args: str) -> dict[str, Any] | None:
        """Run a changing cudaup command, or only record it in check mode."""
        self.changed = True
        self.commands.append(shlex.join(self.cudaup.command(*args)))
        if self.check:
            return None
        return self.cudaup.run(*args)

    def find(self, release: str | None) -> dict[str, Any] | None:
        for toolkit in self.installed:
            if release is not None and toolkit.get("version") == release:
                return toolkit
        return None

    # -- state=present ---------------------------------------------------------------
    def present(self) -> None:
        params = self.params
        if params["lock"]:
            release, wanted, channel = self._from_lock()
            pins: dict[str, str] = {}
        else:
            version = str(params["version"]).strip()
            release = version if EXACT_RELEASE.match(version) else None
            if release is None and self.check:
                release = _resolve_release(self.cudaup, params)
            requests = [component_request(str(c)) for c in params["components"] or []]
            wanted = sorted({name for name, _pin in requests})
            pins = {name: pin for name, pin in requests if pin}
            channel = params["channel"]
        existing = self.find(release)
        libraries = (existing or {}).get("libraries") or {}
        satisfied = (
            existing is not None
            and set(wanted) <= set(existing.get("components") or [])
            and (channel == "auto" or existing.get("channel") == channel)
            # a library pin (cudnn==9.27) holds when the installed build's version is under it
            and all(library_satisfied(libraries.get(n), pin) for n, pin in pins.items())
        )
        if existing is not None and satisfied:
            self.toolkit = {
                "schema": 1,
                **existing,
                "skipped": True,
                "notes": ["already installed"],
            }
            self.toolkit.pop("default", None)
        else:
            document = self.change(*install_args(params))
            if document is None and (release or params["version"]):  # check mode: predict
                label = release or str(params["version"])
                have = set(existing.get("components") or []) if existing else set()
                predicted = {
                    "version": label,
                    "path": existing.get("path") if existing else None,
                    "channel": channel if channel != "auto" else (existing or {}).get("channel"),
                    "components": sorted(have | set(wanted)),
                }
                self.after_installed = [
                    t for t in self.after_installed if t.get("version") != label
                ] + [predicted]
            elif document is not None:
                self.toolkit = document
                release = str(document.get("version") or release)
                if document.get("skipped"):  # cudaup found nothing to add
                    self.changed = False
                    self.commands.pop()
        if params["default"]:
            self._make_default(release)

    def _from_lock(self) -> tuple[str | None, list[str], str]:
        lock = str(self.params["lock"])
        info = read_lock(lock, self.params["platform"])
        if info is None:
            self.module.warn(
                f"could not read the release from {lock}; `cudaup install --lock` decides "
                "what is missing" + (" (check mode assumes a change)" if self.check else "")
            )
            return None, [], "auto"
        return info.release, info.components, info.channel

    def _make_default(self, release: str | None) -> None:
        label = release or (self.toolkit or {}).get("version")
        if not label:
            label = str(self.params["version"] or "")
        if not label:  # a lock we could not read, in check mode: nothing more to predict
            return
        path = (self.toolkit or {}).get("path")
        if self.default is not None and self.default in {label, path}:
            return
        self.change("default", str(label))
        self.after_default = label

    # -- state=absent ----------------------------------------------------------------
    def absent(self) -> None:
        params = self.params
        if params["default"]:
            self.module.warn("default is ignored with state=absent")
        if params["lock"]:
            info = read_lock(str(params["lock"]), params["platform"])
            if info is None:
                fail(
                    self.module,
                    f"cannot read which release {params['lock']} pins for this host "
                    "(is it there, and does it lock this platform?)",
                )
            request = info.release
        else:
            request = str(params["version"]).strip()
        if line_prefix(request) is None:
            fail(
                self.module,
                f"state=absent takes a release (13.0.1) or a line (13.0, 13, cu130), not {request!r}",
            )
        for toolkit in self.installed:
            version = str(toolkit.get("version"))
            if not matches(request, version):
                continue
            self.change("uninstall", version)
            self.removed.append(version)
            self.after_installed = [t for t in self.after_installed if t.get("version") != version]
            if self.after_default in {version, toolkit.get("path")}:
                self.after_default = None

    # -- result ----------------------------------------------------------------------
    def result(self) -> dict[str, Any]:
        installed = self.installed
        default = self.default
        if self.check:
            after = _state(self.after_installed, self.after_default)
        elif self.changed:
            listing = self.cudaup.run("list")
            installed = list(listing.get("installed") or [])
            default = listing.get("default")
            after = _state(installed, default)
        else:
            after = self.before
        result: dict[str, Any] = {
            "changed": self.changed,
            "toolkit": self.toolkit,
            "installed": installed,
            "default": default,
            "removed": self.removed,
            "commands": self.commands,
        }
        if self.module._diff:
            result["diff"] = {"before": self.before, "after": after}
        return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **COMMON_ARGUMENT_SPEC,
            "version": {"type": "str"},
            "lock": {"type": "path"},
            "mirror": {"type": "str"},
            "channel": {
                "type": "str",
                "choices": ["auto", "installer", "redist", "pypi"],
                "default": "auto",
            },
            "components": {"type": "list", "elements": "str"},
            "platform": {"type": "str"},
            "force": {"type": "bool", "default": False},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "default": {"type": "bool", "default": False},
        },
        mutually_exclusive=[("version", "lock"), ("lock", "components")],
        required_one_of=[("version", "lock")],
        supports_check_mode=True,
    )
    run = Run(module, Cudaup(module))
    if module.params["state"] == "present":
        run.present()
    else:
        run.absent()
    module.exit_json(**run.result())


if __name__ == "__main__":
    main()
