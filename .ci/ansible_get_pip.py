"""Stands in for ansible-test's pip bootstrap script.

ansible-test fetches ``get-pip-<version>.py`` from ci-files.testing.ansible.com to put pip
into each sanity test's virtual environment; CI reaches only the package registries.  This
does the same job from what CI has: pip from the standard library's ``ensurepip``, then the
packages ansible-test names (``pip==24.2``), from PyPI.  get-pip's own ``--no-setuptools``
and ``--no-wheel`` are pip's default for a new environment, so they are dropped.  ansible-test
runs this with a trimmed environment (no ``SSL_CERT_FILE``/``PIP_CERT``), and ensurepip's pip
trusts only its own certifi: the system's CA bundle, which curl and the system's pip trust, is
named where the system has one.
"""

import ensurepip
import subprocess
import sys
from pathlib import Path

SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")

ensurepip.bootstrap(upgrade=True)
args = [a for a in sys.argv[1:] if a not in {"--no-setuptools", "--no-wheel"}]
bundle = next((b for b in SYSTEM_BUNDLES if Path(b).is_file()), None)
cert = ["--cert", bundle] if bundle else []
subprocess.run([sys.executable, "-m", "pip", "install", *cert, *args], check=True)
