"""nvcc through the plan's compiler cache in extension builds, with the real nvcc, sccache and ccache.

A .cu file is built twice by the installed torch's BuildExtension, whose Ninja rule runs
$PYTORCH_NVCC pasted into a /bin/sh command line with torch's own flags, with a fresh cache each time the test runs
(its own cache folder and, for sccache, its own server port): the cache's own statistics, read
as the build runner reads them, must show a miss and then a hit for that file.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from pytorch_winbuild.builder.compiler_cache import CacheSession, CacheStats, extension_cache_env, find_nvcc
from pytorch_winbuild.builder.settings import load_settings
from pytorch_winbuild.errors import ConfigurationError

pytestmark = pytest.mark.build

SETTINGS = load_settings()
KERNEL = """\
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
void launch_scale(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""
# The oldest GPU CUDA 13 still compiles for: torch turns it into the -gencode flag itself.
OLDEST_ARCH = "7.5"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _build_like_torch(source: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The extension built by the installed torch's own setup.py path: BuildExtension (build_ext) on an
    extension whose one source is the .cu file. torch writes build.ninja with its flags for nvcc
    (COMMON_NVCC_FLAGS, `--compiler-options '-fPIC'`, the -gencode of TORCH_CUDA_ARCH_LIST, `-ccbin $CC`
    as CC is set here to the cache's own wrapper, its -std) and runs the real ninja on its rule
    `$nvcc -MD -MF $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags`, $nvcc = $PYTORCH_NVCC pasted
    as given into the command /bin/sh runs.

    Two settings stand in for a CUDA wheel of torch, which cannot be installed here (CI and the project's
    machines have the CPU wheel torch==2.13.0; a CUDA wheel is gigabytes): the CPU wheel leaves
    cpp_extension.CUDA_HOME and torch.version.cuda None. CUDA_HOME is what torch's own _find_cuda_home
    answers for this environment; torch.version.cuda is the real nvcc's release, as a matching wheel
    would have it (with None, torch's rule would drop `-MD -MF $out.d`).
    """
    import torch
    from setuptools import Distribution, Extension
    from torch.utils import cpp_extension
    from torch.utils.cpp_extension import BuildExtension

    for name, value in env.items():  # torch and setuptools read the process environment
        if os.environ.get(name) != value:
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", OLDEST_ARCH)
    cuda_home = cpp_extension._find_cuda_home()
    assert cuda_home, "torch finds no CUDA for this environment"
    banner = subprocess.run(
        [str(Path(cuda_home) / "bin" / "nvcc"), "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    release = re.search(r"release (\d+\.\d+),", banner)
    assert release, banner
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", cuda_home)
    monkeypatch.setattr(torch.version, "cuda", release.group(1))
    build = source.parent / "build"
    shutil.rmtree(build, ignore_errors=True)
    (build / "lib").mkdir(parents=True)  # `setup.py build_ext` makes it before build_extensions runs
    dist = Distribution(
        {"name": "scale", "ext_modules": [Extension("scale", [str(source)])], "cmdclass": {"build_ext": BuildExtension}}
    )
    command = dist.get_command_obj("build_ext")
    command.build_temp, command.build_lib = str(build / "temp"), str(build / "lib")  # type: ignore[attr-defined]
    command.ensure_finalized()
    command.run()
    ninja_file = (build / "temp" / "build.ninja").read_text(encoding="utf-8")
    assert f"nvcc = {env['PYTORCH_NVCC']}\n" in ninja_file, ninja_file
    assert list((build / "temp").rglob("scale.o")), "torch's ninja build left no object for the .cu file"


def _cu_counts(stats: CacheStats) -> tuple[int | None, int | None]:
    """(hits, misses) of the .cu file itself: sccache also counts nvcc's inner steps (cudafe++, cicc, ptxas)."""
    if stats.name == "sccache":
        return stats.raw["stats"]["cache_hits"]["counts"].get("CUDA", 0), stats.raw["stats"]["cache_misses"][
            "counts"
        ].get("CUDA", 0)
    return stats.hits, stats.misses


@pytest.mark.parametrize("cache", ["sccache", "ccache"])
def test_cu_file_is_a_miss_then_a_hit_through_pytorch_nvcc(
    cache: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        **os.environ,
        "CCACHE_DIR": str(tmp_path / "ccache"),
        "SCCACHE_DIR": str(tmp_path / "sccache"),
        "SCCACHE_SERVER_PORT": str(_free_port()),
        "SCCACHE_IDLE_TIMEOUT": "0",
    }
    env.pop("PYTORCH_NVCC", None)
    nvcc = find_nvcc(env, env.get("PATH"), SETTINGS.extension_cache.nvcc)
    if nvcc is None:
        pytest.fail("this test needs CUDA's nvcc (CUDA_HOME, nvcc on PATH or /usr/local/cuda).", pytrace=False)
    # A cache folder with a space is refused: torch's BuildExtension takes CXX from setuptools, which splits it
    # at the space (_check_abi then runs ".../spaced"), so no wrapper there could build.
    with pytest.raises(ConfigurationError, match="setuptools splits"):
        extension_cache_env(cache, "linux", env, tmp_path / "spaced cache", SETTINGS.extension_cache)
    variables, how = extension_cache_env(cache, "linux", env, tmp_path / "build-cache", SETTINGS.extension_cache)
    assert variables["PYTORCH_NVCC"] == str(tmp_path / "build-cache" / "launchers" / cache / "nvcc")
    assert f"nvcc ({nvcc}) goes through {cache} too, as PYTORCH_NVCC=nvcc" in how
    source = tmp_path / "cuda ext" / "scale.cu"
    source.parent.mkdir()
    source.write_text(KERNEL, encoding="utf-8")
    build_env = {**env, **variables}
    session = CacheSession(SETTINGS.caches[cache], build_env)
    counts = []
    try:
        for _ in ("cold", "warm"):
            session.start()
            _build_like_torch(source, build_env, monkeypatch)
            counts.append(_cu_counts(session.finish()))
    finally:
        for args in session.commands.after:  # never leave this test's sccache server behind
            subprocess.run([session.executable, *args], env=build_env, capture_output=True, check=False)
    assert counts == [(0, 1), (1, 0)]


def test_nvcc_route_says_what_it_did(tmp_path: Path) -> None:
    settings = SETTINGS.extension_cache
    given = {**os.environ, "PYTORCH_NVCC": "/opt/my/nvcc"}
    variables, how = extension_cache_env("ccache", "linux", given, tmp_path, settings)
    assert "PYTORCH_NVCC" not in variables and how.endswith(
        "; nvcc is left to the PYTORCH_NVCC already set (/opt/my/nvcc)"
    )
    # No CUDA anywhere torch would look: C/C++ wrappers only.
    tools = os.pathsep.join(os.path.dirname(shutil.which(tool) or "") for tool in ("ccache", "c++", "cc"))
    bare = {"PATH": tools}
    without_cuda = replace(settings, nvcc=replace(settings.nvcc, default_home=str(tmp_path / "no-cuda")))
    variables, how = extension_cache_env("ccache", "linux", bare, tmp_path, without_cuda)
    assert "PYTORCH_NVCC" not in variables and "CXX" in variables
    assert how.endswith(f"; no nvcc found (CUDA_HOME, CUDA_PATH, PATH, {tmp_path / 'no-cuda'}), so no nvcc wrapper")
    assert (
        "nvcc is not cached (clcache caches only the C/C++ compiler)"
        in extension_cache_env("clcache", "windows", given, tmp_path, settings)[1]
    )
