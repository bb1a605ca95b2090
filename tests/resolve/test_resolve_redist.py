"""The redist channel: component archives from ``redistrib_X.Y.Z.json``."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
import urllib3

from cudaup.errors import ArtifactNotFoundError, IntegrityError, ReleaseNotFoundError, UsageError
from cudaup.resolve.resolver import Resolver
from tests.fakenvidia.fixtures import MakeFakeNvidia
from tests.fakenvidia.server import FakeNvidiaServer
from tests.fakenvidia.site import Site, VirtualFile
from tests.helpers import settings_for


def test_components_by_alias_from_the_real_12_8_0_manifest(
    fake_nvidia: FakeNvidiaServer, fake_nvidia_site: Site
) -> None:
    resolution = Resolver(settings_for(fake_nvidia)).resolve(
        "12.8.0", platform="linux-x86_64", channel="redist", components=["nvcc", "cuda_cudart"]
    )
    assert [a.component for a in resolution.artifacts] == ["cuda_nvcc", "cuda_cudart"]
    nvcc = resolution.artifacts[0]
    info = fake_nvidia_site.archives[
        "cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-12.8.61-archive.tar.xz"
    ]
    assert (nvcc.sha256, nvcc.size, nvcc.component_version) == (info.sha256, info.size, "12.8.61")
    assert nvcc.url == fake_nvidia.download_url + "/compute/cuda/redist/" + info.relative_path
    assert nvcc.driver == "570.86.10" and resolution.release.date == "2025-01-23"
    assert all(a.verified for a in resolution.artifacts)


def test_synthesized_archives_hash_to_what_the_manifest_says(fake_nvidia: FakeNvidiaServer) -> None:
    resolution = Resolver(settings_for(fake_nvidia)).resolve(
        "cu130", platform="linux-sbsa", channel="redist", components=["nvcc", "cudart"]
    )
    assert resolution.release.version == "13.0.3"
    versions = {a.component: a.component_version for a in resolution.artifacts}
    assert versions == {"cuda_nvcc": "13.0.88", "cuda_cudart": "13.0.96"}
    pool = urllib3.PoolManager()
    for artifact in resolution.artifacts:
        body = pool.request("GET", artifact.url).data
        assert hashlib.sha256(body).hexdigest() == artifact.sha256
        assert len(body) == artifact.size


def test_default_is_every_toolkit_component_never_the_driver(fake_nvidia: FakeNvidiaServer) -> None:
    resolution = Resolver(settings_for(fake_nvidia)).resolve(
        "13.0.0", platform="linux-x86_64", channel="redist"
    )
    components = {a.component for a in resolution.artifacts}
    assert {"cuda_nvcc", "cuda_cudart", "libcublas"} <= components
    assert not components & {"nvidia_driver", "imex", "driver_assistant", "fabricmanager"}


def test_jetson_archives_stop_at_12_x(fake_nvidia: FakeNvidiaServer) -> None:
    resolver = Resolver(settings_for(fake_nvidia))
    jetson = resolver.resolve(
        "12.8.0", platform="linux-aarch64", channel="redist", components=["nvcc"]
    )
    assert jetson.artifacts[0].filename.startswith("cuda_nvcc-linux-aarch64-")
    with pytest.raises(
        ArtifactNotFoundError,
        match=r"no cuda_nvcc archive for linux-aarch64.*\(Thor\) uses the linux-sbsa",
    ):
        resolver.resolve("13.0.0", platform="linux-aarch64", channel="redist", components=["nvcc"])


def test_unknown_component_suggests_names(fake_nvidia: FakeNvidiaServer) -> None:
    with pytest.raises(UsageError, match="no component 'nvccc'; did you mean cuda_nvcc"):
        Resolver(settings_for(fake_nvidia)).resolve(
            "13.0.0", platform="linux-x86_64", channel="redist", components=["nvccc"]
        )


def test_release_without_manifest(fake_nvidia: FakeNvidiaServer) -> None:
    with pytest.raises(
        ReleaseNotFoundError, match="13.4.0 with a redist manifest; nearest: 13.3.1 and 13.4.1"
    ):
        Resolver(settings_for(fake_nvidia)).resolve(
            "13.4.0", platform="windows-x86_64", channel="redist"
        )


def test_mirror_serving_another_size_is_refused(
    make_fake_nvidia: MakeFakeNvidia, fake_nvidia_site: Site
) -> None:
    info = next(
        a
        for a in fake_nvidia_site.archives.values()
        if a.component == "cuda_nvcc"
        and "13.0.1" in fake_nvidia_site.manifests
        and a.platform == "linux-x86_64"
        and a.version == "13.0.88"
    )
    site = dataclasses.replace(
        fake_nvidia_site,
        resources={**fake_nvidia_site.resources, info.path: VirtualFile(info.size + 7, "other")},
    )
    server = make_fake_nvidia(site)
    with pytest.raises(IntegrityError, match="says .* bytes but the server serves"):
        Resolver(settings_for(server)).resolve(
            "13.0.1", platform="linux-x86_64", channel="redist", components=["nvcc"]
        )
