"""A failed fetch's fix is written for where the archives came from.

The public bucket, a mirror given with --mirror, one set as winbuild.mirror (invoke.yaml or
INVOKE_WINBUILD_MIRROR) and a --from-dir folder are fixed in different places: the fix must not
tell someone who gave no mirror to "use another --mirror", nor someone whose mirror comes from
the configuration to "leave out --mirror". Real sockets on 127.0.0.1: a port nothing listens on
refuses the connection, and `.invalid` names never resolve (RFC 2606).
"""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import pytest
from deps_support import FAST, MKL, FaultServer, Fetcher, run_cli

from pytorch_winbuild.errors import DependencyError
from pytorch_winbuild.knowledge.catalog import Archive, select_archives

pytestmark = pytest.mark.network

ONCE = replace(FAST, attempts=1)


def mkl() -> list[Archive]:
    return select_archives(cuda=None, mkl_version="2020.2.254", magma_versions=[])


def refusing_url() -> str:
    """The URL of a port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def failure(fetch: Fetcher, archives: list[Archive], **options: object) -> DependencyError:
    with pytest.raises(DependencyError) as caught:
        fetch(archives, download_settings=ONCE, **options)
    return caught.value


def test_an_unreachable_public_bucket_suggests_a_mirror_not_another_one(fetch: Fetcher) -> None:
    bucket = [replace(archive, base_url=refusing_url()) for archive in mkl()]  # the catalog's own URL, refusing
    error = failure(fetch, bucket)
    assert "could not download" in error.message
    assert "use a mirror (--mirror URL, or winbuild.mirror)" in error.fix and "--from-dir DIR" in error.fix
    assert "another" not in error.fix and "leave out" not in error.fix


def test_a_public_bucket_that_does_not_resolve_is_not_a_misspelt_mirror(fetch: Fetcher) -> None:
    bucket = [replace(archive, base_url="http://ossci-windows.invalid/") for archive in mkl()]
    error = failure(fetch, bucket)
    assert "does not resolve" in error.message
    assert "DNS server" in error.fix and "use a mirror" in error.fix and "spelling" not in error.fix


@pytest.mark.parametrize(
    ("label", "leave_out"),
    [
        ("--mirror", "leave out --mirror"),
        ("winbuild.mirror", "remove `mirror:` from invoke.yaml (or -f FILE), or unset INVOKE_WINBUILD_MIRROR"),
    ],
)
def test_an_unreachable_mirror_is_named_the_way_it_was_given(fetch: Fetcher, label: str, leave_out: str) -> None:
    error = failure(fetch, mkl(), mirror=refusing_url(), mirror_label=label)
    assert f"check that the mirror given as {label} is up" in error.fix
    assert f"point {label} at another mirror, {leave_out} to use the public bucket" in error.fix
    if label != "--mirror":
        assert "--mirror" not in error.fix


def test_a_misspelt_configured_mirror_is_named_as_the_setting(fetch: Fetcher) -> None:
    error = failure(fetch, mkl(), mirror="http://ossci-mirror.invalid/", mirror_label="winbuild.mirror")
    assert "check the spelling of the host in winbuild.mirror" in error.fix and "--mirror" not in error.fix


def test_a_file_missing_from_a_configured_mirror_says_how_to_drop_the_setting(
    server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The label travels from the command line: winbuild.mirror set through Invoke's environment variable."""
    del server.files[MKL]
    monkeypatch.setenv("INVOKE_WINBUILD_MIRROR", server.url)
    result = run_cli("fetch-deps", "--cache-dir", str(tmp_path / "cache"), "--lock-file", str(tmp_path / "deps.lock"))
    assert result.returncode == 4, result.stderr
    assert "HTTP 404" in result.stderr and "Traceback" not in result.stderr
    assert f"copy {MKL} there, or remove `mirror:` from invoke.yaml" in " ".join(result.stderr.split())
    assert "--mirror" not in result.stderr
