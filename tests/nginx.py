"""Run Debian's nginx on loopback for tests and benchmarks: a temporary config, foreground.

with Nginx(root_dir, rate_limits={"capped": "8m"}) as server:
    server.url("plain") + "/file.bin"   # no limit
    server.url("capped") + "/file.bin"  # limit_rate 8m per connection (a CDN's cap)

``tls=(certificate, key)`` serves HTTPS on every port; ``directives`` go into every server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from tests.helpers import require_tool

NGINX = "/usr/sbin/nginx"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Nginx:
    def __init__(
        self,
        root: Path,
        rate_limits: dict[str, str | None] | None = None,
        *,
        tls: tuple[Path, Path] | None = None,
        directives: str = "",
    ) -> None:
        require_tool(NGINX if Path(NGINX).exists() else "nginx", "nginx-light")
        self.root = root
        self.tls = tls
        self.directives = directives
        self.limits = rate_limits or {"plain": None}
        self.ports = {name: _free_port() for name in self.limits}
        self._dir = Path(tempfile.mkdtemp(prefix="cudaup-nginx-"))
        self._process: subprocess.Popen[bytes] | None = None

    def url(self, name: str) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.ports[name]}"

    def _config(self) -> str:
        servers = []
        ssl = ""
        if self.tls:
            certificate, key = self.tls
            ssl = f" ssl; ssl_certificate {certificate}; ssl_certificate_key {key}"
        for name, limit in self.limits.items():
            rate = f"limit_rate {limit};" if limit else ""
            servers.append(
                f"server {{ listen 127.0.0.1:{self.ports[name]}{ssl}; root {self.root}; "
                f"{self.directives} location / {{ {rate} }} }}"
            )
        # As root, nginx's workers would drop to nobody and could not read a private temp dir.
        user = "user root; " if os.geteuid() == 0 else ""
        return (
            f"{user}daemon off; worker_processes 2; pid {self._dir}/nginx.pid; "
            f"error_log {self._dir}/error.log warn; "
            "events { worker_connections 512; } "
            "http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 10000; "
            f"client_body_temp_path {self._dir}/body; proxy_temp_path {self._dir}/proxy; "
            f"fastcgi_temp_path {self._dir}/fastcgi; uwsgi_temp_path {self._dir}/uwsgi; "
            f"scgi_temp_path {self._dir}/scgi; "
            "default_type application/octet-stream; " + " ".join(servers) + " }"
        )

    def __enter__(self) -> Nginx:
        config = self._dir / "nginx.conf"
        config.write_text(self._config())
        binary = NGINX if Path(NGINX).exists() else (shutil.which("nginx") or NGINX)
        self._process = subprocess.Popen(
            [binary, "-c", str(config), "-p", str(self._dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10
        for port in self.ports.values():
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if self._process.poll() is not None or time.monotonic() > deadline:
                        err = self._process.stderr.read().decode() if self._process.stderr else ""
                        raise RuntimeError(f"nginx did not start: {err}") from None
                    time.sleep(0.05)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            if self._process.stderr is not None:
                self._process.stderr.close()
        shutil.rmtree(self._dir, ignore_errors=True)
