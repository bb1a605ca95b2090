"""The installer channel against a fake NVIDIA server serving NVIDIA's real formats."""

from __future__ import annotations

import dataclasses

import pytest

from cudaup.errors import (
    ArtifactNotFoundError,
    IntegrityError,
    ReleaseNotFoundError,
    RemoteFileMissingError,
)
from cudaup.resolve.resolver import Resolver
from tests.fakenvidia import SiteOptions, build_site
from tests.fakenvidia.fixtures import MakeFakeNvidia
from tests.fakenvidia.server import FakeNvidiaServer
from tests.fakenvidia.site import FUTURE_LABEL, Site, VirtualFile
from tests.helpers import CATALOG_PLATFORMS, settings_for


def test_every_catalog_installer_resolves_exactly(
    fake_nvidia: FakeNvidiaServer, fake_nvidia_site: Site
) -> None:
    """Done-when: exact URL, size and md5 of every standalone installer in the catalog."""
    resolver = Resolver(settings_for(fake_nvidia))
    assert len(fake_nvidia_site.catalog) == 114
    for row in fake_nvidia_site.catalog:
        platform = CATALOG_PLATFORMS[row.platform]
        resolution = resolver.resolve(row.version, platform=platform)
        [artifact] = resolution.artifacts
        assert artifact.url == fake_nvidia.local_url(row.url), row
        assert artifact.filename == row.filename
        assert artifact.size == row.size
        assert artifact.md5 == row.md5
        assert artifact.verified and artifact.probed
        assert resolution.release.version == row.version
        if platform.startswith("linux-"):
            assert resolution.release.driver == row.driver  # None for 13.4.1's driverless names


def test_a_release_published_after_the_code_was_written(make_fake_nvidia: MakeFakeNvidia) -> None:
    server = make_fake_nvidia(future_release=True)
    site = server.site
    assert site.future_release is not None
    resolver = Resolver(settings_for(server))
    for row in site.future_release.installers:
        platform = CATALOG_PLATFORMS[row.platform]
        [artifact] = resolver.resolve(FUTURE_LABEL, platform=platform).artifacts
        assert (artifact.url, artifact.size, artifact.md5) == (
            server.local_url(row.url),
            row.size,
            row.md5,
        )
    # ... and "latest" finds it from the live listing, with no code change
    latest = resolver.resolve("latest", platform="linux-x86_64")
    assert latest.release.version == FUTURE_LABEL


@pytest.mark.parametrize(
    ("request_text", "platform", "expected"),
    [
        ("13.0", "linux-x86_64", "13.0.3"),
        ("cu130", "linux-sbsa", "13.0.3"),
        ("13", "linux-x86_64", "13.4.1"),
        ("latest", "windows-arm64", "13.4.1"),
        ("cu128", "windows-x86_64", "12.8.2"),
        ("12.8 Update 1", "linux-x86_64", "12.8.1"),
        ("12", "linux-sbsa", "12.9.2"),
    ],
)
def test_aliases(
    fake_nvidia: FakeNvidiaServer, request_text: str, platform: str, expected: str
) -> None:
    resolution = Resolver(settings_for(fake_nvidia)).resolve(request_text, platform=platform)  # type: ignore[arg-type]
    assert resolution.release.version == expected


def test_no_12_7_names_the_nearest_releases(fake_nvidia: FakeNvidiaServer) -> None:
    resolver = Resolver(settings_for(fake_nvidia))
    for text in ("12.7", "12.7.0", "cu127"):
        with pytest.raises(
            ReleaseNotFoundError, match=r"no CUDA 12\.7.*nearest: 12\.6\.3 and 12\.8\.0"
        ) as info:
            resolver.resolve(text, platform="linux-x86_64")
        assert info.value.nearest == ("12.6.3", "12.8.0")


def test_13_4_0_is_a_windows_only_preview_on_another_host(
    fake_nvidia: FakeNvidiaServer, fake_nvidia_site: Site
) -> None:
    resolver = Resolver(settings_for(fake_nvidia))
    with pytest.raises(
        ArtifactNotFoundError,
        match="13.4.0 \\(a developer preview\\) has no standalone installer for linux-x86_64.*windows-x86_64, windows-arm64",
    ):
        resolver.resolve("13.4.0", platform="linux-x86_64")
    resolution = resolver.resolve("13.4.0", platform="windows-x86_64")
    [artifact] = resolution.artifacts
    row = fake_nvidia_site.installer("13.4.0", "windows-amd64")
    assert artifact.url == fake_nvidia.local_url(row.url)
    assert artifact.url.startswith(fake_nvidia.prerelease_url)
    assert artifact.sha256 == "b743a3323116bf33404953ef58a9b9a3319368241f6352e933e9461409e9a759"
    assert artifact.md5 == row.md5 and artifact.verified
    assert resolution.release.preview and resolution.release.label == "CUDA 13.4 Developer Preview"
    assert "sha256sum.txt" in {s.kind for s in artifact.sources}


def test_jetson_never_had_a_runfile(fake_nvidia: FakeNvidiaServer) -> None:
    with pytest.raises(ArtifactNotFoundError, match="Jetson .* never had a runfile"):
        Resolver(settings_for(fake_nvidia)).resolve("12.8.0", platform="linux-aarch64")


def test_drivers_repeat_across_patches_but_names_do_not_collide(
    fake_nvidia: FakeNvidiaServer,
) -> None:
    resolver = Resolver(settings_for(fake_nvidia))
    a = resolver.resolve("12.3.1", platform="linux-x86_64")
    b = resolver.resolve("12.3.2", platform="linux-x86_64")
    assert a.release.driver == b.release.driver == "545.23.08"
    assert a.artifacts[0].filename == "cuda_12.3.1_545.23.08_linux.run"
    assert b.artifacts[0].filename == "cuda_12.3.2_545.23.08_linux.run"
    assert a.artifacts[0].md5 != b.artifacts[0].md5


def test_sources_vouch_for_each_fact(fake_nvidia: FakeNvidiaServer) -> None:
    [artifact] = (
        Resolver(settings_for(fake_nvidia)).resolve("13.0.1", platform="linux-x86_64").artifacts
    )
    kinds = {s.kind: s for s in artifact.sources}
    assert set(kinds) == {
        "download-archive page",
        "md5sum.txt",
        "redistrib_13.0.1.json",
        "HEAD probe",
    }
    assert (
        "md5" in kinds["md5sum.txt"].vouches and "driver" in kinds["redistrib_13.0.1.json"].vouches
    )
    assert artifact.driver == "580.82.07"


VARIANTS = [
    SiteOptions(md5sum_separator=" "),
    SiteOptions(listing_quote='"', listing_duplicates=True),
    SiteOptions(react_structure="top"),
    SiteOptions(react_structure="absent"),
    SiteOptions(react_checksums="details"),
    SiteOptions(react_checksums="absent"),
    SiteOptions(details_patch_link_first=True),
    SiteOptions(
        md5sum_separator=" ",
        listing_quote='"',
        react_structure="absent",
        react_checksums="details",
        details_patch_link_first=True,
    ),
]


@pytest.mark.parametrize("options", VARIANTS, ids=repr)
def test_parsers_are_tolerant_of_every_plausible_variant(
    make_fake_nvidia: MakeFakeNvidia, options: SiteOptions
) -> None:
    server = make_fake_nvidia(options)
    resolver = Resolver(settings_for(server))
    for label in ("12.8.0", "13.0.1", "13.4.1"):
        for platform_key, platform in CATALOG_PLATFORMS.items():
            try:
                row = server.site.installer(label, platform_key)
            except KeyError:
                continue
            [artifact] = resolver.resolve(label, platform=platform).artifacts
            assert (artifact.url, artifact.size, artifact.md5) == (
                server.local_url(row.url),
                row.size,
                row.md5,
            )
    assert resolver.resolve("13.0", platform="linux-x86_64").release.version == "13.0.3"


def test_release_without_md5sum_txt(make_fake_nvidia: MakeFakeNvidia) -> None:
    server = make_fake_nvidia(missing_md5sum=frozenset({"12.6.1"}), react_checksums="absent")
    resolution = Resolver(settings_for(server)).resolve("12.6.1", platform="linux-x86_64")
    [artifact] = resolution.artifacts
    assert artifact.md5 is None and artifact.sha256 is None
    assert artifact.probed and not artifact.verified
    assert any("publishes no checksum" in note for note in resolution.notes)
    # with the page carrying md5 fields, the page's own payload vouches for the md5
    server = make_fake_nvidia(missing_md5sum=frozenset({"12.6.1"}))
    [artifact] = Resolver(settings_for(server)).resolve("12.6.1", platform="linux-x86_64").artifacts
    assert artifact.md5 == server.site.installer("12.6.1", "linux-amd64").md5 and artifact.verified


def test_release_without_archive_page(make_fake_nvidia: MakeFakeNvidia) -> None:
    server = make_fake_nvidia(missing_archive_page=frozenset({"12.5.0"}))
    row = server.site.installer("12.5.0", "linux-arm64")
    resolution = Resolver(settings_for(server)).resolve("12.5.0", platform="linux-sbsa")
    [artifact] = resolution.artifacts
    assert (artifact.url, artifact.md5, artifact.size) == (
        server.local_url(row.url),
        row.md5,
        row.size,
    )
    assert artifact.verified  # md5sum.txt named it, the probe found it
    assert "download-archive page" not in {s.kind for s in artifact.sources}
    # without the probe nothing confirmed the location: listed, but not verified
    unprobed = Resolver(settings_for(server, probe=False)).resolve("12.5.0", platform="linux-sbsa")
    assert not unprobed.artifacts[0].verified and unprobed.artifacts[0].size is None


def test_release_with_neither_page_nor_md5sum_is_not_guessed(
    make_fake_nvidia: MakeFakeNvidia,
) -> None:
    server = make_fake_nvidia(
        missing_archive_page=frozenset({"12.5.0"}), missing_md5sum=frozenset({"12.5.0"})
    )
    with pytest.raises(ArtifactNotFoundError, match="no standalone installer for linux-x86_64"):
        Resolver(settings_for(server)).resolve("12.5.0", platform="linux-x86_64")
    # the file exists on the server, but no source lists it: cudaup will not build its name
    assert server.count() > 0 and server.site.installer("12.5.0", "linux-amd64")


def _with_resource(site: Site, path: str, resource: VirtualFile) -> Site:
    return dataclasses.replace(site, resources={**site.resources, path: resource})


def test_size_disagreeing_with_the_page_is_an_error(make_fake_nvidia: MakeFakeNvidia) -> None:
    site = build_site()
    row = site.installer("13.0.1", "linux-amd64")
    server = make_fake_nvidia(
        _with_resource(site, row.path, VirtualFile(row.size - 1, "truncated"))
    )
    with pytest.raises(
        IntegrityError, match=f"{row.size} bytes but the server serves {row.size - 1}"
    ):
        Resolver(settings_for(server)).resolve("13.0.1", platform="linux-x86_64")


def test_listed_file_missing_on_the_server(make_fake_nvidia: MakeFakeNvidia) -> None:
    site = build_site()
    row = site.installer("13.0.2", "linux-amd64")
    resources = {k: v for k, v in site.resources.items() if k != row.path}
    server = make_fake_nvidia(dataclasses.replace(site, resources=resources))
    with pytest.raises(
        RemoteFileMissingError,
        match="answered HTTP 404, although download-archive page, md5sum.txt",
    ):
        Resolver(settings_for(server)).resolve("13.0.2", platform="linux-x86_64")


def test_request_budget_cold_and_warm(fake_nvidia_fresh: FakeNvidiaServer) -> None:
    server = fake_nvidia_fresh
    Resolver(settings_for(server)).resolve("13.0.1", platform="linux-x86_64")
    assert server.count() <= 4
    server.clear_log()
    Resolver(settings_for(server)).resolve("13.0.1", platform="linux-x86_64")
    assert server.count() <= 2
    assert [r.method for r in server.log] == ["HEAD"]
    server.clear_log()
    Resolver(settings_for(server, refresh=True)).resolve("13.0.1", platform="linux-x86_64")
    assert server.count() == 4
