"""A real nightly over a matrix with a failing entry leaves a pip index pip installs from and a dashboard that a
real browser renders: mini torch built from a real git repository, pip into fresh venvs, headless Chromium."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from channel_support import (
    assert_links_resolve,
    check_dashboard,
    chromium,
    fresh_venv,
    http_server,
    pip_install,
    run_in,
)
from nightly_support import commit_all, entries_by_name, git, run_nightly, summaries, write_matrix

pytestmark = [pytest.mark.build, pytest.mark.network, pytest.mark.browser]

# What g++ prints for this line matches the diagnosis rule `out-of-memory` (build_config/diagnosis.toml).
OOM_SOURCE = (
    '// Added on the branch `oom`: the build dies as it does when RAM runs out.\n#error "virtual memory exhausted"\n'
)
OOM_TITLE = "[out-of-memory] The machine ran out of memory during the build"
IMPORT_CHECK = "import sys, torch; print(torch.__version__, torch.__file__.startswith(sys.prefix), torch.add(2, 3))"


PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def test_a_night_with_a_failing_entry_leaves_an_index_and_a_dashboard(mini_repo: Path, tmp_path: Path) -> None:
    git(mini_repo, "checkout", "-q", "-b", "oom")
    (mini_repo / "csrc" / "oom.cpp").write_text(OOM_SOURCE, encoding="utf-8")
    commit_all(mini_repo, "the build runs out of memory")
    git(mini_repo, "checkout", "-q", "main")
    output = tmp_path / "dist" / "nightly"
    matrix = write_matrix(
        tmp_path / "matrix.toml",
        [
            # The wheels are for this Python (as the shipped matrix names its entries' Python): pip installs
            # them below into a venv of it.
            {
                "name": "cpu",
                "repo": str(mini_repo),
                "ref": "main",
                "cuda": "cpu",
                "compiler_cache": "none",
                "python": PYTHON,
            },
            {
                "name": "cpu-oom",
                "repo": str(mini_repo),
                "ref": "oom",
                "cuda": "cpu",
                "compiler_cache": "none",
                "python": PYTHON,
            },
        ],
        output_dir=output,
    )

    done = run_nightly("--matrix", str(matrix), "--cache-dir", str(tmp_path / "cache"))

    assert done.returncode == 5, done.stdout[-3000:] + done.stderr
    assert f"  index     {output / 'simple' / 'index.html'} (1 wheel(s): mini-torch (1))" in done.stdout
    assert f"  dashboard {output / 'index.html'}" in done.stdout
    entries = entries_by_name(summaries(output)[-1])
    assert entries["cpu-oom"]["result"] == "failed" and entries["cpu-oom"]["diagnosis"][0]["id"] == "out-of-memory"
    wheel = Path(entries["cpu"]["wheel"])
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    page = (output / "simple" / "mini-torch" / "index.html").read_text()
    assert f'href="../../{wheel.parent.parent.name}/cpu/{quote(wheel.name)}#sha256={digest}"' in page

    # pip installs the night's wheel from the index over HTTP into a fresh venv (file:// and each entry's own
    # index: tests/nightly/test_index.py).
    expected = "2.13.0a0+mini True 5"  # the compiled torch._C of the wheel, imported from the venv
    with http_server(output) as served, chromium() as browser:
        venv = fresh_venv(tmp_path / "venv")
        installed = pip_install(venv, f"{served.url}simple/", "mini_torch==2.13.0a0+mini")
        assert installed.returncode == 0, installed.stdout + installed.stderr
        assert run_in(venv, IMPORT_CHECK) == expected
        assert f'GET /{wheel.parent.parent.name}/cpu/{quote(wheel.name)} HTTP/1.1" 200' in served.log()

        # The dashboard, from the server and from file://: both entries, the failing one marked with its diagnosis.
        for url in (served.url, (output / "index.html").as_uri()):
            hrefs = check_dashboard(browser, url, ["cpu", "cpu-oom"], "cpu-oom", OOM_TITLE)
            assert_links_resolve(browser, hrefs)
            assert any(href.endswith(f"/cpu-oom/{Path(entries['cpu-oom']['log']).name}") for href in hrefs)
            assert any(href.endswith(f"/cpu/{quote(wheel.name)}") for href in hrefs)
