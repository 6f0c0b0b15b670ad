"""nvcc through the plan's compiler cache in extension builds, with the real nvcc, sccache and ccache.

A .cu file is compiled twice by the command torch.utils.cpp_extension's Ninja rule runs
($PYTORCH_NVCC pasted into a /bin/sh command line), with a fresh cache each time the test runs
(its own cache folder and, for sccache, its own server port): the cache's own statistics, read
as the build runner reads them, must show a miss and then a hit for that file.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from pytorch_winbuild.builder.compiler_cache import CacheSession, CacheStats, extension_cache_env, find_nvcc
from pytorch_winbuild.builder.settings import load_settings

pytestmark = pytest.mark.build

SETTINGS = load_settings()
KERNEL = """\
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
void launch_scale(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""
# The flags torch 2.14.1 gives nvcc for an extension (less the include folders), for the oldest
# GPU CUDA 13 still compiles for.
TORCH_NVCC_FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--compiler-options",
    "'-fPIC'",
    "-gencode=arch=compute_75,code=sm_75",
    "-std=c++17",
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _compile_like_torch(source: Path, env: dict[str, str]) -> None:
    """torch's rule: `$nvcc -MD -MF $out.d $cuda_cflags -c $in -o $out $cuda_post_cflags`, run by /bin/sh.

    Its flags end with `-ccbin $CC` when CC is set, as it is here (the cache's own wrapper).
    """
    target = source.with_suffix(".o")
    target.unlink(missing_ok=True)
    flags = [*TORCH_NVCC_FLAGS, "-ccbin", env["CC"]]
    command = (
        f"{env['PYTORCH_NVCC']} -MD -MF {shlex.quote(str(target))}.d -c {shlex.quote(str(source))} -o "
        f"{shlex.quote(str(target))} {shlex.join(flags)}"
    )
    done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert target.is_file()


def _cu_counts(stats: CacheStats) -> tuple[int | None, int | None]:
    """(hits, misses) of the .cu file itself: sccache also counts nvcc's inner steps (cudafe++, cicc, ptxas)."""
    if stats.name == "sccache":
        return stats.raw["stats"]["cache_hits"]["counts"].get("CUDA", 0), stats.raw["stats"]["cache_misses"][
            "counts"
        ].get("CUDA", 0)
    return stats.hits, stats.misses


@pytest.mark.parametrize("cache", ["sccache", "ccache"])
def test_cu_file_is_a_miss_then_a_hit_through_pytorch_nvcc(cache: str, tmp_path: Path) -> None:
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
    # Folder names with spaces: PYTORCH_NVCC lands unquoted in a shell command line.
    variables, how = extension_cache_env(cache, "linux", env, tmp_path / "build cache", SETTINGS.extension_cache)
    wrapper = tmp_path / "build cache" / "launchers" / cache / "nvcc"
    assert variables["PYTORCH_NVCC"] == shlex.quote(str(wrapper))
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
            _compile_like_torch(source, build_env)
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
