"""What build-ext reads in an extension's setup.py before it may skip a build (builder/extension_key.py): setup.py is
read, not run, so anything it could take from outside the extension's folder makes the build uncertain, and an
uncertain build is always run (issue 39, point 1); the variables it names by literal join the key."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytorch_winbuild.builder import extension_key
from pytorch_winbuild.builder.extension_key import read_setup

PLAIN = """
import os
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

flags = ["/O2", "/std:c++17"] if os.name == "nt" else ["-O3"]
debug = os.environ.get("MY_EXT_DEBUG", "0") == "1" or os.getenv("MY_EXT_TRACE")
setup(
    name="ext",
    url="https://example.invalid/ext",
    ext_modules=[CppExtension("ext", ["csrc/a.cpp", "csrc/b.cpp"], extra_compile_args=flags)],
    cmdclass={"build_ext": BuildExtension},
)
"""


def test_a_setup_py_within_its_folder_is_certain_and_names_its_variables() -> None:
    assert read_setup(PLAIN) == (frozenset({"MY_EXT_DEBUG", "MY_EXT_TRACE"}), None)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('sources = ["../common/x.cpp"]', "setup.py names '../common/x.cpp', outside the extension's folder"),
        ('sources = ["..\\\\common\\\\x.cpp"]', "outside the extension's folder"),
        ("root = os.path.join(here, os.pardir)", "setup.py uses os.pardir"),
        ('include = ["/opt/vendor/include"]', "setup.py names the absolute path '/opt/vendor/include'"),
        ('flags = ["-I/usr/local/include/x"]', "absolute path"),
        ('include = ["C:\\\\libs\\\\include"]', "absolute path"),
        ("root = Path(__file__).parent.parent", "a parent of a parent folder"),
        ("root = os.path.dirname(os.path.dirname(__file__))", "the dirname of a dirname"),
        ("value = os.environ[name]", "an environment variable whose name is no literal"),
        ("env = dict(os.environ)", "reads os.environ as a whole"),
        ("def broken(:", "cannot be read as Python"),
    ],
)
def test_what_reaches_outside_the_folder_makes_the_build_uncertain(line: str, why: str) -> None:
    _, uncertain = read_setup(PLAIN + line + "\n")
    assert uncertain is not None and why in uncertain


@pytest.mark.skipif(sys.platform == "win32", reason="Windows lists with scandir only")
def test_torch_files_are_listed_alike_from_open_folders_and_by_scandir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key's listing of torch's include/ (stat'ed from each open folder on POSIX) says what scandir's says, links
    by what they lead to, and a header rewritten in place changes its line."""
    (tmp_path / "ATen" / "ops").mkdir(parents=True)
    header = tmp_path / "ATen" / "ops" / "add.h"
    header.write_text("#pragma once\n", encoding="utf-8")
    (tmp_path / "a.h").write_text("", encoding="utf-8")
    os.symlink("a.h", tmp_path / "link.h")
    os.symlink("nowhere.h", tmp_path / "broken.h")
    os.symlink("ATen", tmp_path / "linked_folder")
    listed: list[str] = []
    assert extension_key._tree_lines(str(tmp_path), listed) == 5
    monkeypatch.setattr(extension_key, "_AT_FOLDER", False)
    scanned: list[str] = []
    assert extension_key._tree_lines(str(tmp_path), scanned) == 5
    assert listed == scanned
    assert f"{tmp_path / 'broken.h'} missing" in listed
    os.utime(header, ns=(1, 1))
    monkeypatch.setattr(extension_key, "_AT_FOLDER", True)
    again: list[str] = []
    extension_key._tree_lines(str(tmp_path), again)
    assert [line for line in again if line not in listed] == [f"{header} 13 1"]
