"""Benchmark Python HTTP clients for cudaup's workloads, on loopback.

cudaup downloads multi-GB CUDA installers and many small JSON/HTML metadata files. This script
compares urllib3 2.x, requests, httpx (sync, HTTP/1.1) and the stdlib http.client, with curl as a
reference, against a fast local server: nginx when /usr/sbin/nginx exists (temporary config,
sendfile on), otherwise a ThreadingHTTPServer in a subprocess. It measures:

1. import time of each client module in a fresh interpreter (best of 5);
2. single-stream download of a large file, 1 MiB chunked reads discarded (MB/s);
3. parallel ranged download: N threads, one contiguous Range each, one shared pool (MB/s);
4. sequential small GETs of a 2 KiB JSON on a keep-alive connection (requests/s);
5. single stream with hashlib.sha256 updated per chunk (MB/s);

each as the best of --repeats runs (default 3), with candidates interleaved run by run. It also
checks empirically which clients honour HTTP_PROXY / http_proxy / NO_PROXY from the environment.

Usage (from the repository root):

    .venv/bin/python benchmarks/http_clients.py --output benchmarks/results/http_clients.md
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import platform
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import requests
import urllib3
from requests.adapters import HTTPAdapter

MIB = 1 << 20
CHUNK = MIB
MB = 1_000_000
LOOPBACK = "127.0.0.1"
BIG_NAME = "big.bin"
SMALL_NAME = "small.json"
SMALL_SIZE = 2048
NGINX = Path("/usr/sbin/nginx")
CURL = ("curl", "-q", "-sS", "--fail")  # -q (ignore ~/.curlrc) must come first
CURL_DIRECT = (*CURL, "--noproxy", "*")
IMPORT_MODULES = ("urllib3", "requests", "httpx", "http.client")
# Proxy check: a loopback address where nothing listens, so a direct connection is refused
# quickly, while a client that honours the proxy variables reaches the benchmark server.
UNPROXIED_HOST = "127.0.0.2"
UNPROXIED_PORT = 9
PROXY_VARS = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})

Sink = Callable[[bytes], object]
ByteRange = tuple[int, int]  # inclusive first and last byte, as in the Range header


# --------------------------------------------------------------------------------------------
# Test data and servers
# --------------------------------------------------------------------------------------------


def small_json() -> bytes:
    """Return a JSON document of exactly SMALL_SIZE bytes, shaped like a redistrib manifest."""
    head = b'{"release_label": "12.4.1", "cuda_cudart": {"version": "12.4.127"}, "pad": "'
    tail = b'"}\n'
    return head + b"x" * (SMALL_SIZE - len(head) - len(tail)) + tail


def make_docroot(docroot: Path, size_mib: int) -> str:
    """Write the big random file and the small JSON; return the big file's SHA-256."""
    docroot.mkdir(mode=0o755)
    digest = hashlib.sha256()
    with (docroot / BIG_NAME).open("wb") as f:
        for _ in range(size_mib):
            block = os.urandom(MIB)
            digest.update(block)
            f.write(block)
    (docroot / SMALL_NAME).write_bytes(small_json())
    for path in docroot.iterdir():
        path.chmod(0o644)  # nginx workers may run as nobody
    return digest.hexdigest()


@dataclass(frozen=True)
class Server:
    description: str
    port: int

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def url(self, name: str) -> str:
        return f"{self.base_url}/{name}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(proc: subprocess.Popen[bytes], port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode}")
        conn = http.client.HTTPConnection(LOOPBACK, port, timeout=1)
        try:
            conn.request("GET", f"/{SMALL_NAME}")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.05)
        finally:
            conn.close()
    raise RuntimeError("server did not become ready")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server we started in its own session: SIGTERM, then SIGKILL its group."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


NGINX_CONF = """\
worker_processes auto;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{
    worker_connections 1024;
}}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 10000;
    keepalive_timeout 600s;
    default_type application/octet-stream;
    types {{
        application/json json;
    }}
{temp_paths}
    server {{
        listen {host}:{port};
        root {docroot};
    }}
}}
"""


def nginx_temp_paths(tmp: Path) -> str:
    """Temp-path directives for the modules this nginx has, so it never touches /var/lib."""
    configure = subprocess.run([NGINX, "-V"], check=False, capture_output=True, text=True).stderr
    lines = [f"    client_body_temp_path {tmp / 'client_body'};"]
    for module in ("proxy", "fastcgi", "uwsgi", "scgi"):
        if f"--without-http_{module}_module" not in configure:
            lines.append(f"    {module}_temp_path {tmp / module};")
    return "\n".join(lines)


@contextmanager
def nginx_server(tmp: Path, docroot: Path) -> Iterator[Server]:
    version = subprocess.run(
        [NGINX, "-v"], check=False, capture_output=True, text=True
    ).stderr.strip()
    conf = tmp / "nginx.conf"
    for _ in range(3):  # nginx needs a concrete port; retry if another process grabs it
        port = free_port()
        conf.write_text(
            NGINX_CONF.format(
                tmp=tmp, temp_paths=nginx_temp_paths(tmp), host=LOOPBACK, port=port, docroot=docroot
            )
        )
        with (tmp / "stderr.log").open("wb") as stderr:
            proc = subprocess.Popen(
                [NGINX, "-p", tmp, "-c", conf, "-e", tmp / "error.log", "-g", "daemon off;"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        try:
            wait_ready(proc, port)
        except RuntimeError:
            stop(proc)
            continue
        try:
            desc = f"{version.removeprefix('nginx version: ')} (sendfile on, worker_processes auto)"
            yield Server(desc, port)
        finally:
            stop(proc)
        return
    logs = [(tmp / name).read_text(errors="replace") for name in ("stderr.log", "error.log")]
    raise RuntimeError("nginx failed to start:\n" + "\n".join(logs))


def parse_range(value: str, size: int) -> ByteRange | None:
    """Parse a single 'bytes=first-[last]' range; anything else is ignored (200 response)."""
    unit, _, spec = value.partition("=")
    first, _, last = spec.strip().partition("-")
    if unit.strip() != "bytes" or "," in spec or not first.isdigit():
        return None
    start = int(first)
    end = min(int(last), size - 1) if last.isdigit() else size - 1
    return (start, end) if start <= end else None


class RangeFileHandler(BaseHTTPRequestHandler):
    """Keep-alive static file handler with single-range support, sending with sendfile(2)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else header and body segments meet delayed ACKs: 40 ms/GET
    root = Path()

    def do_GET(self) -> None:
        name = urlsplit(self.path).path.lstrip("/")  # also accepts absolute-form (proxy) URIs
        path = self.root / name
        if "/" in name or not path.is_file():
            self.send_error(404)
            return
        size = path.stat().st_size
        byte_range = parse_range(self.headers.get("Range", ""), size)
        start, end = byte_range or (0, size - 1)
        self.send_response(206 if byte_range else 200)
        kind = "application/json" if name.endswith(".json") else "application/octet-stream"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        if byte_range:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if end >= start:
            with path.open("rb") as f:
                self.connection.sendfile(f, start, end - start + 1)

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve_directory(root: Path) -> None:
    """Entry point of the fallback server subprocess: print the port, serve until killed."""
    RangeFileHandler.root = root
    server = ThreadingHTTPServer((LOOPBACK, 0), RangeFileHandler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


@contextmanager
def python_server(docroot: Path) -> Iterator[Server]:
    proc = subprocess.Popen(
        [sys.executable, Path(__file__).resolve(), "--serve-dir", docroot],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        wait_ready(proc, port)
        yield Server("Python ThreadingHTTPServer in a subprocess (socket.sendfile)", port)
    finally:
        stop(proc)


# --------------------------------------------------------------------------------------------
# Candidates
# --------------------------------------------------------------------------------------------


def range_header(byte_range: ByteRange | None) -> dict[str, str]:
    return {"Range": f"bytes={byte_range[0]}-{byte_range[1]}"} if byte_range else {}


def check_status(status: int, byte_range: ByteRange | None) -> None:
    expected = 206 if byte_range else 200
    if status != expected:
        raise RuntimeError(f"HTTP {status}, expected {expected}")


class Candidate(ABC):
    """One HTTP client, holding one pool of up to `pool` connections for all threads."""

    def __init__(self, name: str, base_url: str, pool: int) -> None:
        self.name = name
        self.base_url = base_url
        self.pool = pool

    @abstractmethod
    def download(
        self, path: str, byte_range: ByteRange | None = None, sink: Sink | None = None
    ) -> int:
        """Stream `path` (optionally one byte range) in CHUNK reads; return the byte count."""

    @abstractmethod
    def get_small(self, path: str) -> bytes:
        """Fetch a small resource the idiomatic non-streaming way; return its body."""

    @abstractmethod
    def close(self) -> None: ...


class Urllib3Candidate(Candidate):
    def __init__(self, base_url: str, pool: int) -> None:
        super().__init__("urllib3", base_url, pool)
        self.manager = urllib3.PoolManager(maxsize=pool, block=True)

    def download(
        self, path: str, byte_range: ByteRange | None = None, sink: Sink | None = None
    ) -> int:
        url = self.base_url + path
        resp = self.manager.request(
            "GET", url, headers=range_header(byte_range), preload_content=False
        )
        try:
            check_status(resp.status, byte_range)
            count = 0
            for chunk in resp.stream(CHUNK):
                count += len(chunk)
                if sink is not None:
                    sink(chunk)
            return count
        finally:
            resp.release_conn()

    def get_small(self, path: str) -> bytes:
        resp = self.manager.request("GET", self.base_url + path)
        check_status(resp.status, None)
        return resp.data

    def close(self) -> None:
        self.manager.clear()


class RequestsCandidate(Candidate):
    def __init__(self, base_url: str, pool: int, *, trust_env: bool = True) -> None:
        name = "requests" if trust_env else "requests (trust_env=False)"
        super().__init__(name, base_url, pool)
        self.session = requests.Session()
        self.session.trust_env = trust_env
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=pool, pool_block=True)
        self.session.mount("http://", adapter)

    def download(
        self, path: str, byte_range: ByteRange | None = None, sink: Sink | None = None
    ) -> int:
        url = self.base_url + path
        with self.session.get(url, headers=range_header(byte_range), stream=True) as resp:
            check_status(resp.status_code, byte_range)
            count = 0
            for chunk in resp.iter_content(CHUNK):
                count += len(chunk)
                if sink is not None:
                    sink(chunk)
            return count

    def get_small(self, path: str) -> bytes:
        resp = self.session.get(self.base_url + path)
        check_status(resp.status_code, None)
        return resp.content

    def close(self) -> None:
        self.session.close()


class HttpxCandidate(Candidate):
    def __init__(self, base_url: str, pool: int) -> None:
        super().__init__("httpx", base_url, pool)
        limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
        self.client = httpx.Client(limits=limits, timeout=httpx.Timeout(60.0))  # HTTP/1.1 only

    def download(
        self, path: str, byte_range: ByteRange | None = None, sink: Sink | None = None
    ) -> int:
        url = self.base_url + path
        with self.client.stream("GET", url, headers=range_header(byte_range)) as resp:
            check_status(resp.status_code, byte_range)
            count = 0
            for chunk in resp.iter_bytes(CHUNK):
                count += len(chunk)
                if sink is not None:
                    sink(chunk)
            return count

    def get_small(self, path: str) -> bytes:
        resp = self.client.get(self.base_url + path)
        check_status(resp.status_code, None)
        return resp.content

    def close(self) -> None:
        self.client.close()


class HttpClientCandidate(Candidate):
    """Stdlib http.client: one persistent connection per thread (no pool exists)."""

    def __init__(self, base_url: str, pool: int) -> None:
        super().__init__("http.client", base_url, pool)
        parts = urlsplit(base_url)
        self.host = parts.hostname or LOOPBACK
        self.port = parts.port or 80
        self.local = threading.local()
        self.lock = threading.Lock()
        self.connections: list[http.client.HTTPConnection] = []

    def connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            self.local.conn = conn
            with self.lock:
                self.connections.append(conn)
        return conn

    def download(
        self, path: str, byte_range: ByteRange | None = None, sink: Sink | None = None
    ) -> int:
        conn = self.connection()
        conn.request("GET", path, headers=range_header(byte_range))
        resp = conn.getresponse()
        check_status(resp.status, byte_range)
        count = 0
        while chunk := resp.read(CHUNK):
            count += len(chunk)
            if sink is not None:
                sink(chunk)
        return count

    def get_small(self, path: str) -> bytes:
        conn = self.connection()
        conn.request("GET", path)
        resp = conn.getresponse()
        check_status(resp.status, None)
        return resp.read()

    def close(self) -> None:
        with self.lock:
            for conn in self.connections:
                conn.close()
            self.connections.clear()


# --------------------------------------------------------------------------------------------
# Workloads: each returns elapsed seconds and verifies what it received
# --------------------------------------------------------------------------------------------


def split_ranges(size: int, parts: int) -> list[ByteRange]:
    bounds = [size * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(parts)]


def expect(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        raise RuntimeError(f"{what}: got {actual!r}, expected {expected!r}")


def timed_single(client: Candidate, size: int) -> float:
    start = time.perf_counter()
    count = client.download(f"/{BIG_NAME}")
    elapsed = time.perf_counter() - start
    expect(count, size, f"{client.name} single stream bytes")
    return elapsed


def timed_parallel(client: Candidate, size: int, connections: int) -> float:
    ranges = split_ranges(size, connections)
    counts = [0] * connections
    errors: list[BaseException] = []
    barrier = threading.Barrier(connections + 1)

    def worker(index: int) -> None:
        barrier.wait()
        try:
            counts[index] = client.download(f"/{BIG_NAME}", ranges[index])
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    expect(counts, [last - first + 1 for first, last in ranges], f"{client.name} range bytes")
    return elapsed


def timed_small(client: Candidate, count: int) -> float:
    body = small_json()
    expect(client.get_small(f"/{SMALL_NAME}"), body, f"{client.name} small body")  # warm
    start = time.perf_counter()
    for _ in range(count):
        if len(client.get_small(f"/{SMALL_NAME}")) != SMALL_SIZE:
            raise RuntimeError(f"{client.name}: short small GET")
    return time.perf_counter() - start


def timed_hashed(client: Candidate, size: int, digest: str) -> float:
    sha = hashlib.sha256()
    start = time.perf_counter()
    count = client.download(f"/{BIG_NAME}", sink=sha.update)
    elapsed = time.perf_counter() - start
    expect((count, sha.hexdigest()), (size, digest), f"{client.name} hashed stream")
    return elapsed


def timed_hash_only(size_mib: int) -> float:
    block = os.urandom(MIB)
    sha = hashlib.sha256()
    start = time.perf_counter()
    for _ in range(size_mib):
        sha.update(block)
    return time.perf_counter() - start


def curl_single(url: str, size: int) -> float:
    start = time.perf_counter()
    out = subprocess.run(
        [*CURL_DIRECT, "-o", os.devnull, "-w", "%{size_download}", url],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    elapsed = time.perf_counter() - start
    expect(int(out), size, "curl single stream bytes")
    return elapsed


def curl_parallel(url: str, size: int, connections: int) -> float:
    ranges = split_ranges(size, connections)
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [*CURL_DIRECT, "-o", os.devnull, "-w", "%{size_download}", "-r", f"{a}-{b}", url],
            stdout=subprocess.PIPE,
            text=True,
        )
        for a, b in ranges
    ]
    outputs = [proc.communicate()[0] for proc in procs]
    elapsed = time.perf_counter() - start
    expect([proc.returncode for proc in procs], [0] * connections, "curl exit codes")
    expect([int(o) for o in outputs], [b - a + 1 for a, b in ranges], "curl range bytes")
    return elapsed


def curl_small(url: str, count: int) -> float:
    """One curl process fetching `count` URLs, so it reuses one keep-alive connection."""
    config = f'url = "{url}"\noutput = "{os.devnull}"\n' * count
    start = time.perf_counter()
    out = subprocess.run(
        [*CURL_DIRECT, "-w", "%{http_code} %{num_connects}\n", "-K", "-"],
        input=config,
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    elapsed = time.perf_counter() - start
    codes = [line.split() for line in out.splitlines()]
    expect(len(codes), count, "curl small responses")
    expect({code for code, _ in codes}, {"200"}, "curl small status")
    expect(sum(int(n) for _, n in codes), 1, "curl connections opened")
    return elapsed


def curl_hashed(url: str, digest: str) -> float:
    start = time.perf_counter()
    curl = subprocess.Popen([*CURL_DIRECT, url], stdout=subprocess.PIPE)
    assert curl.stdout is not None
    sha = subprocess.Popen(["sha256sum"], stdin=curl.stdout, stdout=subprocess.PIPE, text=True)
    curl.stdout.close()
    out = sha.communicate()[0]
    curl.wait()
    elapsed = time.perf_counter() - start
    expect((curl.returncode, out.split()[0]), (0, digest), "curl | sha256sum")
    return elapsed


def round_robin(tasks: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Run every task `repeats` times, interleaved so drift affects all candidates alike."""
    samples: dict[str, list[float]] = {name: [] for name in tasks}
    for _ in range(repeats):
        for name, task in tasks.items():
            samples[name].append(task())
    return samples


# --------------------------------------------------------------------------------------------
# Import time
# --------------------------------------------------------------------------------------------


def importtime_ms(python: str, code: str, baseline: frozenset[str]) -> tuple[float, set[str]]:
    """Sum of top-level `-X importtime` cumulative times of modules not in `baseline`."""
    stderr = subprocess.run(
        [python, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True
    ).stderr
    total_us = 0
    names: set[str] = set()
    for line in stderr.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if len(fields) != 3 or not fields[1].strip().isdigit():
            continue
        name = fields[2].strip()
        names.add(name)
        if fields[2].startswith("  ") or name in baseline:  # nested, or imported at startup
            continue
        total_us += int(fields[1])
    return total_us / 1000, names


def measure_imports(repeats: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Wall time of `python -c "import X"` minus `python -c pass` (ms), plus -X importtime."""
    python = sys.executable

    def wall(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([python, "-c", code], check=True)
        return time.perf_counter() - start

    for module in IMPORT_MODULES:  # warm the page cache and any missing .pyc files
        wall(f"import {module}")
    tasks: dict[str, Callable[[], float]] = {"python -c pass": partial(wall, "pass")}
    for module in IMPORT_MODULES:
        tasks[module] = partial(wall, f"import {module}")
    raw = round_robin(tasks, repeats)
    base = min(raw.pop("python -c pass"))
    samples = {name: [(t - base) * 1000 for t in times] for name, times in raw.items()}

    _, startup = importtime_ms(python, "pass", frozenset())
    cumulative = {
        module: min(
            importtime_ms(python, f"import {module}", frozenset(startup))[0] for _ in range(3)
        )
        for module in IMPORT_MODULES
    }
    return samples, cumulative


# --------------------------------------------------------------------------------------------
# Environment (proxy) handling, checked empirically
# --------------------------------------------------------------------------------------------


@contextmanager
def proxy_environment(settings: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.lower() in PROXY_VARS]:
        del os.environ[key]
    os.environ.update(settings)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def probe_status(fetch: Callable[[str], int], url: str) -> str:
    try:
        status = fetch(url)
    except (OSError, httpx.HTTPError, urllib3.exceptions.HTTPError, requests.RequestException):
        return "direct"
    return "proxy" if status == 200 else f"HTTP {status}"


def fetch_urllib3(url: str) -> int:
    return urllib3.PoolManager(retries=False, timeout=5.0).request("GET", url).status


def fetch_requests(url: str) -> int:
    with requests.Session() as session:
        return session.get(url, timeout=5).status_code


def fetch_httpx(url: str) -> int:
    with httpx.Client(timeout=5.0) as client:
        return client.get(url).status_code


def fetch_http_client(url: str) -> int:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        conn.request("GET", parts.path)
        return conn.getresponse().status
    finally:
        conn.close()


def fetch_urllib_request(url: str) -> int:
    try:
        # A fresh opener: urlopen()'s global one keeps the proxies it saw when first used.
        with urllib.request.build_opener().open(url, timeout=5) as resp:
            status: int = resp.status
            return status
    except urllib.error.URLError as exc:
        raise OSError(str(exc)) from exc


def fetch_curl(url: str) -> int:
    result = subprocess.run(
        [*CURL, "--max-time", "5", "-o", os.devnull, "-w", "%{http_code}", url],
        check=False,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise OSError(result.stderr.strip())
    return int(result.stdout)


def check_proxy_support(server: Server) -> dict[str, dict[str, str]]:
    """For each client and setting: 'proxy' if it went through the proxy, else 'direct'."""
    target = f"http://{UNPROXIED_HOST}:{UNPROXIED_PORT}/{SMALL_NAME}"
    proxy = server.base_url
    scenarios = {
        "HTTP_PROXY": {"HTTP_PROXY": proxy},
        "http_proxy": {"http_proxy": proxy},
        f"http_proxy + NO_PROXY={UNPROXIED_HOST}": {
            "http_proxy": proxy,
            "NO_PROXY": UNPROXIED_HOST,
        },
    }
    fetchers: dict[str, Callable[[str], int]] = {
        "urllib3": fetch_urllib3,
        "requests": fetch_requests,
        "httpx": fetch_httpx,
        "http.client": fetch_http_client,
        "urllib.request (stdlib)": fetch_urllib_request,
        "curl": fetch_curl,
    }
    with proxy_environment({}):
        if any(probe_status(fetch, target) != "direct" for fetch in fetchers.values()):
            return {}  # something answers on the target: the check would be meaningless
    results: dict[str, dict[str, str]] = {name: {} for name in fetchers}
    for scenario, settings in scenarios.items():
        with proxy_environment(settings):
            for name, fetch in fetchers.items():
                results[name][scenario] = probe_status(fetch, target)
    return results


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    lower_is_better: bool = False
    digits: int = 0


ROWS = (
    "urllib3",
    "requests",
    "requests (trust_env=False)",
    "httpx",
    "http.client",
    "curl (reference)",
    "hashlib.sha256 only, no I/O",
)


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def fmt_cell(value: float | None, ref: float | None, metric: Metric) -> str:
    if value is None:
        return "—"
    text = f"{value:,.{metric.digits}f}"
    return f"{text} ({value / ref:.2f}x)" if ref else text


def render(
    *,
    metrics: list[Metric],
    best: dict[str, dict[str, float]],
    samples: dict[str, dict[str, list[float]]],
    importtime: dict[str, float],
    proxies: dict[str, dict[str, str]],
    context: dict[str, str],
) -> str:
    out = [
        "# HTTP client benchmark for cudaup",
        "",
        "Command:",
        "",
        "```sh",
        f"cd {shlex.quote(str(Path.cwd()))} && {shlex.join(sys.orig_argv)}",
        "```",
        "",
    ]
    out += [f"- {key}: {value}" for key, value in context.items()]
    header = "| Client | " + " | ".join(m.title for m in metrics) + " |"
    out += ["", header, "|" + "---|" * (len(metrics) + 1)]
    for row in ROWS:
        if not any(row in best[m.key] for m in metrics):
            continue
        cells = [fmt_cell(best[m.key].get(row), best[m.key].get("urllib3"), m) for m in metrics]
        out.append(f"| {row} | " + " | ".join(cells) + " |")
    out += [
        "",
        "Best of the repeated runs; (Nx) = ratio to urllib3 in the same column. Throughput and "
        "req/s: higher is better; import time: lower is better. MB = 10^6 bytes. curl timings "
        "include process start-up (one process per stream; one process for all small GETs, "
        "reusing one connection). Small GETs are sequential on one keep-alive connection, "
        "after one warm-up request.",
        "",
        "`-X importtime` cumulative import time (ms, best of 3; modules loaded at interpreter "
        "start-up excluded): " + ", ".join(f"{name} {ms:.1f}" for name, ms in importtime.items()),
        "",
        "## All samples",
        "",
        "| Measurement | Client | Samples (run order) |",
        "|---|---|---|",
    ]
    for metric in metrics:
        for row in ROWS:
            if row in samples[metric.key]:
                values = ", ".join(f"{v:,.{metric.digits}f}" for v in samples[metric.key][row])
                out.append(f"| {metric.title} | {row} | {values} |")
    if proxies:
        scenarios = list(next(iter(proxies.values())))
        out += [
            "",
            "## Proxy variables honoured (checked empirically)",
            "",
            f"GET http://{UNPROXIED_HOST}:{UNPROXIED_PORT}/ (nothing listens there) with the "
            "benchmark server set as the proxy in the environment, default client settings: "
            "`proxy` = request went through the proxy, `direct` = proxy ignored.",
            "",
            "| Client | " + " | ".join(f"`{s}`" for s in scenarios) + " |",
            "|" + "---|" * (len(scenarios) + 1),
        ]
        for name, result in proxies.items():
            out.append(f"| {name} | " + " | ".join(result[s] for s in scenarios) + " |")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--size-mib", type=int, default=512, help="large file size (MiB)")
    parser.add_argument("--output", type=Path, help="also write the markdown report here")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (best of)")
    parser.add_argument("--import-repeats", type=int, default=5, help="runs per import timing")
    parser.add_argument("--connections", type=int, default=8, help="parallel ranged streams")
    parser.add_argument("--small-requests", type=int, default=300, help="sequential small GETs")
    parser.add_argument(
        "--server",
        choices=("auto", "nginx", "python"),
        default="auto",
        help="auto: nginx if /usr/sbin/nginx exists, else Python's ThreadingHTTPServer",
    )
    parser.add_argument("--serve-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.size_mib < 1 or args.repeats < 1 or args.connections < 1 or args.small_requests < 1:
        parser.error("sizes and counts must be positive")
    return args


def run(args: argparse.Namespace) -> str:
    started = time.perf_counter()
    if shutil.which("curl") is None:
        raise SystemExit("curl is required for the reference line")
    # Loopback traffic must never go through a proxy from the environment. The clients keep
    # their default trust_env behaviour (its per-request cost is part of the measurement).
    for var in ("NO_PROXY", "no_proxy"):
        os.environ[var] = ",".join(filter(None, [os.environ.get(var), LOOPBACK, "localhost"]))

    size = args.size_mib * MIB
    n, count = args.connections, args.small_requests
    metrics = [
        Metric("import", "Import time, ms", lower_is_better=True, digits=1),
        Metric("single", "1 stream, MB/s"),
        Metric("parallel", f"{n} ranged conns, MB/s"),
        Metric("small", f"{count} small GETs, req/s"),
        Metric("hash", "1 stream + SHA-256, MB/s"),
    ]
    samples: dict[str, dict[str, list[float]]] = {m.key: {} for m in metrics}

    print("measuring import times ...", file=sys.stderr)
    samples["import"], importtime = measure_imports(args.import_repeats)

    use_nginx = args.server == "nginx" or (args.server == "auto" and NGINX.exists())
    with tempfile.TemporaryDirectory(prefix="http-clients-bench-") as tmpdir:
        tmp = Path(tmpdir)
        tmp.chmod(0o755)
        print(f"writing {args.size_mib} MiB test file ...", file=sys.stderr)
        digest = make_docroot(tmp / "www", args.size_mib)
        serve = nginx_server(tmp, tmp / "www") if use_nginx else python_server(tmp / "www")
        with serve as server:
            big, small = server.url(BIG_NAME), server.url(SMALL_NAME)
            clients: list[Candidate] = [
                Urllib3Candidate(server.base_url, n),
                RequestsCandidate(server.base_url, n),
                HttpxCandidate(server.base_url, n),
                HttpClientCandidate(server.base_url, n),
            ]
            no_env = RequestsCandidate(server.base_url, n, trust_env=False)
            curl = "curl (reference)"
            try:
                print("single stream ...", file=sys.stderr)
                tasks: dict[str, Callable[[], float]]
                tasks = {c.name: partial(timed_single, c, size) for c in clients}
                tasks[curl] = partial(curl_single, big, size)
                samples["single"] = round_robin(tasks, args.repeats)

                print(f"{n} parallel ranged streams ...", file=sys.stderr)
                tasks = {c.name: partial(timed_parallel, c, size, n) for c in clients}
                tasks[curl] = partial(curl_parallel, big, size, n)
                samples["parallel"] = round_robin(tasks, args.repeats)

                print(f"{count} small GETs ...", file=sys.stderr)
                tasks = {c.name: partial(timed_small, c, count) for c in [*clients, no_env]}
                tasks[curl] = partial(curl_small, small, count)
                samples["small"] = round_robin(tasks, args.repeats)

                print("hash while streaming ...", file=sys.stderr)
                tasks = {
                    "urllib3": partial(timed_hashed, clients[0], size, digest),
                    curl: partial(curl_hashed, big, digest),
                    "hashlib.sha256 only, no I/O": partial(timed_hash_only, args.size_mib),
                }
                samples["hash"] = round_robin(tasks, args.repeats)

                print("proxy variables ...", file=sys.stderr)
                proxies = check_proxy_support(server)
            finally:
                for client in [*clients, no_env]:
                    client.close()
            server_description = server.description

    # Convert elapsed seconds to rates; import samples are already milliseconds.
    for key in ("single", "parallel", "hash"):
        samples[key] = {k: [size / t / MB for t in v] for k, v in samples[key].items()}
    samples["small"] = {k: [count / t for t in v] for k, v in samples["small"].items()}
    best = {
        m.key: {k: (min(v) if m.lower_is_better else max(v)) for k, v in samples[m.key].items()}
        for m in metrics
    }
    curl_version = subprocess.run(
        ["curl", "--version"], check=False, capture_output=True, text=True
    ).stdout
    libs = ", ".join(
        f"{d} {version(d)}" for d in ("urllib3", "requests", "httpx", "httpcore", "h11")
    )
    context = {
        "Date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "Host": f"{os.cpu_count()} CPUs ({cpu_model()}), {platform.platform()}",
        "Python": f"{platform.python_version()} ({sys.executable}), {ssl.OPENSSL_VERSION}",
        "Libraries": libs,
        "curl": curl_version.splitlines()[0] if curl_version else "unknown",
        "Server": f"{server_description}, on {LOOPBACK}",
        "Workload": (
            f"{args.size_mib} MiB random file, {CHUNK // MIB} MiB reads; {n} ranged connections; "
            f"{count} GETs of a {SMALL_SIZE} B JSON; best of {args.repeats} "
            f"(imports: best of {args.import_repeats})"
        ),
        "Total run time": f"{time.perf_counter() - started:.0f} s",
    }
    return render(
        metrics=metrics,
        best=best,
        samples=samples,
        importtime=importtime,
        proxies=proxies,
        context=context,
    )


def main() -> None:
    args = parse_args()
    if args.serve_dir is not None:
        serve_directory(args.serve_dir)
        return
    report = run(args)
    print(report)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report)


if __name__ == "__main__":
    main()
