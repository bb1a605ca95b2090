"""Releases served from a fault server in NVIDIA's and PyPI's real formats, with the
archives a test needs (big, many-filed, lying): a redist manifest and its .tar.xz, or
a PEP 691 index with the ``cuda-toolkit`` wheel's metadata and one component wheel."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import lzma
import tarfile
import zipfile

from tests.faultserver import FaultServer

#: path below the archive's top directory → (bytes, mode)
Files = dict[str, tuple[bytes, int]]


def serve_redist(server: FaultServer, release: str, files: Files) -> bytes:
    """``cuda_nvcc`` of ``release`` for linux-x86_64, holding ``files``; the archive."""
    top = f"cuda_nvcc-linux-x86_64-{release}-archive"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    body = lzma.compress(buffer.getvalue(), preset=0)
    relative = f"cuda_nvcc/linux-x86_64/{top}.tar.xz"
    manifest = {
        "release_date": "2030-01-01", "release_label": release, "release_product": "cuda",
        "cuda_nvcc": {"name": "CUDA NVCC", "license": "CUDA Toolkit", "version": release,
                      "linux-x86_64": {"relative_path": relative, "sha256": hashlib.sha256(body).hexdigest(),
                                       "md5": hashlib.md5(body).hexdigest(), "size": str(len(body))}},
    }  # fmt: skip
    server.add(f"/compute/cuda/redist/redistrib_{release}.json", json.dumps(manifest).encode())
    server.add(f"/compute/cuda/redist/{relative}", body)
    return body


def _record_row(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def make_wheel(project: str, version: str, files: Files, *, record: bool = True) -> bytes:
    """A wheel of ``files`` with METADATA, WHEEL and (unless told) a RECORD of them all."""
    dist = f"{project.replace('-', '_')}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n".encode()
    members: Files = {
        **files,
        f"{dist}/METADATA": (metadata, 0o644),
        f"{dist}/WHEEL": (b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n", 0o644),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, (data, mode) in members.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.create_system, info.external_attr = 3, (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
        if record:
            rows = "".join(_record_row(name, data) for name, (data, _mode) in members.items())
            archive.writestr(f"{dist}/RECORD", rows + f"{dist}/RECORD,,\n")
    return buffer.getvalue()


def _page(
    server: FaultServer, project: str, filename: str, body: bytes, files: FaultServer
) -> None:
    path = f"/files/{filename}"
    files.add(path, body)
    url = path if files is server else files.url + path
    entry = {
        "filename": filename, "url": url, "yanked": False, "size": len(body),
        "hashes": {"sha256": hashlib.sha256(body).hexdigest()}, "core-metadata": True,
    }  # fmt: skip
    document = {"meta": {"api-version": "1.1"}, "name": project, "files": [entry]}
    server.add(f"/simple/{project}/", json.dumps(document).encode())


def serve_pypi(server: FaultServer, release: str, wheel: bytes, version: str = "13.0.88") -> str:
    """``cuda-toolkit==release`` whose ``cudart`` extra pins ``nvidia-cuda-runtime==version``,
    that wheel being ``wheel``; the index URL."""
    return serve_extras(server, release, {"cudart": ("nvidia-cuda-runtime", version, wheel)})


def serve_extras(
    server: FaultServer,
    release: str,
    extras: dict[str, tuple[str, str, bytes]],
    files: FaultServer | None = None,
) -> str:
    """``cuda-toolkit==release`` whose extras each pin one component wheel:
    ``{extra: (project, version, wheel)}``; the index URL.  With ``files``, the wheels and
    their metadata are on that server, as PyPI's are on a host of their own."""
    files = files or server
    lines = [f"Metadata-Version: 2.1\nName: cuda-toolkit\nVersion: {release}\n"]
    for extra, (project, version, _wheel) in extras.items():
        lines.append(f"Provides-Extra: {extra}\n")
        lines.append(f'Requires-Dist: {project}=={version}.*; extra == "{extra}"\n')
    meta_wheel = make_wheel("cuda-toolkit", release, {})
    meta_name = f"cuda_toolkit-{release}-py2.py3-none-any.whl"
    _page(server, "cuda-toolkit", meta_name, meta_wheel, files)
    files.add(f"/files/{meta_name}.metadata", "".join(lines).encode())
    for project, version, wheel in extras.values():
        name = f"{project.replace('-', '_')}-{version}-py3-none-manylinux_2_27_x86_64.whl"
        _page(server, project, name, wheel, files)
        files.add(f"/files/{name}.metadata", f"Metadata-Version: 2.1\nName: {project}\n".encode())
    return f"{server.url}/simple"


CUDART: Files = {
    "nvidia/cu13/lib/libcudart.so.13": (b"\x7fELF fake cudart 13.0.88", 0o755),
    "nvidia/cu13/include/cuda_runtime.h": (b"#pragma once\n", 0o644),
}
