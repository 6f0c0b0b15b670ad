"""A mirror URL whose credentials cannot be read one way only is refused (exit 2) without being shown,
under the name it was given by: --mirror, or winbuild.mirror from a -f file."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_invoke

from pytorch_winbuild.text.redact import userinfo_secrets

SECRET = "s3cretPW"


@pytest.mark.parametrize(
    ("mirror", "said"),
    [
        (f"file://user:{SECRET}@host/share/", "is a file:// URL with a user name or password"),
        (f"https://user:{SECRET} x@mirror.example/", "holds a space, a tab or a control character"),
        (f"https://user:{SECRET}\tx@mirror.example/", "holds a space, a tab or a control character"),
    ],
)
@pytest.mark.parametrize("given", ["flag", "file"])
def test_unreadable_credentials_are_refused_unshown(tmp_path: Path, mirror: str, said: str, given: str) -> None:
    if given == "flag":
        args, label = ["--mirror", mirror], "--mirror"
    else:
        config = tmp_path / "winbuild.yaml"
        quoted = mirror.replace("\t", "\\t")  # a YAML double-quoted string
        config.write_text(f'winbuild:\n  mirror: "{quoted}"\n', encoding="utf-8")
        args, label = ["-f", str(config)], "winbuild.mirror"
    for dry_run in ([], ["--dry-run"]):
        if given == "file":
            result = run_invoke(*args, "fetch-deps", "--cuda", "cpu", *dry_run)
        else:
            result = run_invoke("fetch-deps", "--cuda", "cpu", *args, *dry_run)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "Traceback" not in result.stderr and SECRET not in result.stdout + result.stderr
        assert result.stderr.startswith(f"configuration error: {label} {said}")


def test_a_password_with_a_space_in_a_whole_value_is_found() -> None:
    assert list(userinfo_secrets(f"https://user:{SECRET} x@mirror.example/")) == [f"{SECRET} x"]
    assert list(userinfo_secrets(f"https://{SECRET} x@mirror.example/")) == [f"{SECRET} x"]
    assert list(userinfo_secrets("https://mirror.example/a b@c")) == []
