"""Package indexes on loopback that answer as PyPI and the CUDA indexes do.

Each *root* (``/pypi``, ``/torch-cu130`` …) is one simple index: project pages
as PEP 691 JSON when asked for it (``Accept``) and the root allows it, else
PEP 503 HTML; wheels with HEAD and single byte ranges (suffix ranges too);
PEP 658 ``.metadata`` files when published.  A root can be taken down (every
request answers 503), and every request is logged, so a test can count what a
plan asked.  Wheels are built by :mod:`tests.plan.builders`.
"""

from __future__ import annotations

import hashlib
import html
import http.server
import io
import json
import re
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

JSON = "application/vnd.pypi.simple.v1+json"
_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    status: int


@dataclass
class Root:
    html_only: bool = False
    down: bool = False
    pages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class IndexServer:
    def __init__(self) -> None:
        self.roots: dict[str, Root] = {}
        self.files: dict[str, bytes] = {}
        self.log: list[Request] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                owner.handle(self, body=True)

            def do_HEAD(self) -> None:
                owner.handle(self, body=False)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # -- content ---------------------------------------------------------------
    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def url(self, root: str) -> str:
        return f"{self.base}/{root}"

    def root(self, name: str, *, html_only: bool = False) -> Root:
        return self.roots.setdefault(name, Root(html_only=html_only))

    def add(
        self,
        root: str,
        filename: str,
        body: bytes,
        *,
        pep658: bool = True,
        yanked: bool | str = False,
        requires_python: str | None = None,
        hashed: bool = True,
    ) -> str:
        """Publish one file on ``root``; its project comes from the file name."""
        project = re.sub(r"[-_.]+", "-", filename.split("-", 1)[0]).lower()
        path = f"/{root}/files/{filename}"
        self.files[path] = body
        if pep658 and filename.endswith(".whl"):
            self.files[path + ".metadata"] = _metadata_of(body)
        entry: dict[str, Any] = {
            "filename": filename,
            "url": f"{self.base}{path}",
            "hashes": {"sha256": hashlib.sha256(body).hexdigest()} if hashed else {},
            "requires-python": requires_python,
            "yanked": yanked,
            "core-metadata": pep658,
            "size": len(body),
        }
        self.root(root).pages.setdefault(project, []).append(entry)
        return f"{self.base}{path}"

    def requests(self, prefix: str = "/") -> list[Request]:
        with self._lock:
            return [r for r in self.log if r.path.startswith(prefix)]

    def sent_for(self, path: str) -> int:
        return len(self.requests(path))

    # -- serving ---------------------------------------------------------------
    def handle(self, request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        path = request.path.split("?", 1)[0]
        name = path.strip("/").split("/", 1)[0]
        root = self.roots.get(name)
        status, headers, data = 404, {"Content-Type": "text/plain"}, b"not found"
        if root is not None and root.down:
            status, data = 503, b"down for maintenance"
        elif path in self.files:
            status, headers, data = self._file(path, request.headers.get("Range"))
        elif root is not None:
            project = path.strip("/").split("/", 1)[1] if "/" in path.strip("/") else ""
            project = project.strip("/")
            if project in root.pages:
                wants_json = JSON in (request.headers.get("Accept") or "") and not root.html_only
                data = _page(root.pages[project], wants_json, project)
                headers = {"Content-Type": JSON if wants_json else "text/html"}
                status = 200
        with self._lock:
            self.log.append(Request(request.command, path, request.headers.get("Range"), status))
        request.send_response(status)
        for key, value in headers.items():
            request.send_header(key, value)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        if body:
            request.wfile.write(data)

    def _file(self, path: str, spec: str | None) -> tuple[int, dict[str, str], bytes]:
        data = self.files[path]
        headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        match = _RANGE.match(spec.strip()) if spec else None
        if not match:
            return 200, headers, data
        size = len(data)
        if match.group(1):
            start = int(match.group(1))
            end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
        else:
            start, end = max(0, size - int(match.group(2))), size - 1
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        return 206, headers, data[start : end + 1]

    def __enter__(self) -> IndexServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _metadata_of(wheel: bytes) -> bytes:
    archive = zipfile.ZipFile(io.BytesIO(wheel))
    name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    return archive.read(name)


def _page(entries: list[dict[str, Any]], as_json: bool, project: str) -> bytes:
    if as_json:
        document = {"meta": {"api-version": "1.1"}, "name": project, "files": entries}
        return json.dumps(document).encode()
    links = []
    for entry in entries:
        sha = entry["hashes"].get("sha256")
        href = entry["url"] + (f"#sha256={sha}" if sha else "")
        attributes = [f'href="{html.escape(href)}"']
        if entry["requires-python"]:
            attributes.append(f'data-requires-python="{html.escape(entry["requires-python"])}"')
        if entry["yanked"] is True:
            attributes.append("data-yanked")
        elif entry["yanked"]:
            attributes.append(f'data-yanked="{html.escape(entry["yanked"])}"')
        if entry["core-metadata"]:
            attributes.append('data-core-metadata="true"')
        links.append(f"<a {' '.join(attributes)}>{html.escape(entry['filename'])}</a><br>")
    return ("<html><body>\n" + "\n".join(links) + "\n</body></html>\n").encode()


@pytest.fixture
def index_server() -> Iterator[IndexServer]:
    with IndexServer() as server:
        yield server
