"""Facts files as Windows writes them (issue 38, point 5): `invoke doctor --json > facts.json` in Windows PowerShell
5.1 writes UTF-16 with a byte-order mark and CRLF lines, `Out-File -Encoding UTF8` UTF-8 with one; `--host` reads
both and plans what the probe plans. `doctor --json --output FILE` writes UTF-8 whatever the shell, and a file in
another encoding is refused with a fix that works when followed."""

from __future__ import annotations

import codecs
import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from support import HOSTS_DIR, run_invoke

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import load_facts
from pytorch_winbuild.json_file import BadJson, parse_json, read_json

# Plans for this machine and for its facts file; --jobs fixes MAX_JOBS, which the available memory (a figure that
# changes from one probe to the next) would set otherwise.
PLANS = (
    ("env", "--cuda", "cpu", "--jobs", "2", "--format", "json"),
    ("build", "--dry-run", "--cuda", "cpu", "--jobs", "2", "--format", "json"),
)


def powershell_redirect(text: str) -> bytes:  # Windows PowerShell 5.1 runs on Windows only (docs/test-doubles.md)
    """The bytes Windows PowerShell 5.1's `>` (Out-File, encoding Unicode) writes for a native command's output: each
    line it read, ended by CRLF, as UTF-16 LE after its byte-order mark."""
    return codecs.BOM_UTF16_LE + "".join(line + "\r\n" for line in text.splitlines()).encode("utf-16-le")


# Each way a Windows shell or editor writes a facts file that --host reads.
WRITTEN: dict[str, Callable[[str], bytes]] = {
    "PowerShell 5.1 >: UTF-16 LE, byte-order mark, CRLF": powershell_redirect,
    "UTF-16 BE with its byte-order mark": lambda text: codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
    "UTF-8 with a byte-order mark (Out-File -Encoding UTF8, Notepad)": lambda text: codecs.BOM_UTF8 + text.encode(),
}


def _probed_facts() -> str:
    done = run_invoke("doctor", "--json")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _plans(*host: str) -> list[str]:
    outputs = []
    for args in PLANS:
        done = run_invoke(*args, *host)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    return outputs


@pytest.mark.parametrize("write", WRITTEN.values(), ids=WRITTEN.keys())
def test_host_reads_the_facts_as_windows_wrote_them_and_plans_what_the_probe_plans(
    tmp_path: Path, write: Callable[[str], bytes]
) -> None:
    facts = tmp_path / "facts.json"
    facts.write_bytes(write(_probed_facts()))
    assert _plans("--host", str(facts)) == _plans()
    doctor = run_invoke("doctor", "--host", str(facts))
    assert "Traceback" not in doctor.stderr and "configuration error" not in doctor.stderr, doctor.stderr


def test_the_powershell_bytes_are_what_powershell_writes() -> None:
    """Out-File's Unicode is UTF-16 LE with FF FE first; each line ends with CR LF (0D 00 0A 00)."""
    assert powershell_redirect('{\n  "a": 1\n}\n') == bytes.fromhex(
        "fffe 7b00 0d000a00 2000 2000 2200 6100 2200 3a00 2000 3100 0d000a00 7d00 0d000a00"
    )


@pytest.mark.parametrize("write", WRITTEN.values(), ids=WRITTEN.keys())
@pytest.mark.parametrize("host", sorted(HOSTS_DIR.glob("*.json")), ids=lambda path: path.name)
def test_every_shipped_facts_file_loads_the_same_in_each_encoding(
    tmp_path: Path, host: Path, write: Callable[[str], bytes]
) -> None:
    data = json.loads(host.read_text(encoding="utf-8"))
    data["description"] += " — Zoë's machine in 東京 𝄞"  # beyond ASCII and beyond UTF-16's first plane
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    original, written = tmp_path / "utf-8.json", tmp_path / "written.json"
    original.write_text(text, encoding="utf-8")
    written.write_bytes(write(text))
    assert load_facts(written) == load_facts(original)
    assert load_facts(written).description.endswith("東京 𝄞")


def test_doctor_output_writes_utf8_that_host_plans_as_the_probe_does(tmp_path: Path) -> None:
    facts = tmp_path / "my facts.json"
    done = run_invoke("doctor", "--json", "--output", str(facts))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and f"wrote {facts}" in done.stderr
    data = facts.read_bytes()
    assert not data.startswith(codecs.BOM_UTF8) and b"\r" not in data
    written, printed = json.loads(data.decode("utf-8")), json.loads(_probed_facts())
    assert written.pop("memory_available_mib") > 0 and printed.pop("memory_available_mib") > 0
    assert written == printed
    assert _plans("--host", str(facts)) == _plans()
    # written again over itself from a PowerShell file: the same UTF-8 file
    facts.write_bytes(powershell_redirect(data.decode("utf-8")))
    again = run_invoke("doctor", "--host", str(facts), "--json", "--output", str(facts))
    assert again.returncode == 0, again.stderr
    assert facts.read_bytes() == data


def test_doctor_output_needs_json_and_writes_nothing_without_it(tmp_path: Path) -> None:
    target = tmp_path / "facts.json"
    done = run_invoke("doctor", "--output", str(target))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "doctor's --output writes the facts file, which needs --json" in done.stderr
    assert "invoke doctor --json --output FILE" in done.stderr and not target.exists()
    folder = run_invoke("doctor", "--json", "--output", str(tmp_path))
    assert folder.returncode == 2 and f"name a file, e.g. --output {tmp_path / 'facts.json'}" in folder.stderr


def test_doctor_has_no_short_flag_that_reads_a_file_it_was_asked_to_write(tmp_path: Path) -> None:
    """-o was --host (Invoke's automatic short flags, -h being help): `invoke doctor --json -o facts.json` printed
    that file's facts instead of writing this machine's."""
    facts = tmp_path / "facts.json"
    facts.write_bytes((HOSTS_DIR / "cpu-only.json").read_bytes())
    done = run_invoke("doctor", "--json", "-o", str(facts))
    assert done.returncode == 2 and "has no flag -o" in done.stderr
    assert facts.read_bytes() == (HOSTS_DIR / "cpu-only.json").read_bytes()


@pytest.mark.parametrize(
    ("codec", "reason"),
    [
        pytest.param("cp1252", "not UTF-8 text (byte", id="Windows-1252"),
        pytest.param("utf-16-le", "UTF-16 or UTF-32 without a byte-order mark", id="UTF-16 without its mark"),
        pytest.param("utf-32", "UTF-32 text", id="UTF-32"),
    ],
)
def test_another_encoding_is_refused_with_a_fix_that_works(tmp_path: Path, codec: str, reason: str) -> None:
    """The fix names `--output`; followed as printed (here, for the machine this test runs on), --host reads what
    it wrote. Before, it named the same `>` that wrote the file."""
    data = json.loads((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8"))
    data["description"] += ", Café"  # a character Windows-1252 writes as one byte that UTF-8 cannot decode
    facts = tmp_path / "facts.json"
    facts.write_bytes(json.dumps(data, indent=2, ensure_ascii=False).encode(codec))
    refused = run_invoke("env", "--host", str(facts), "--cuda", "cpu")
    assert refused.returncode == 2, refused.stderr
    assert reason in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    command = re.search(r"regenerate it with `([^`]+)`", refused.stderr)
    assert command, refused.stderr
    words = shlex.split(command.group(1))
    assert words[:4] == ["invoke", "doctor", "--json", "--output"] and ">" not in words
    followed = run_invoke(*words[1:], cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr
    assert _plans("--host", str(tmp_path / words[4])) == _plans()


def test_load_facts_names_the_fix_for_an_encoding_it_cannot_read(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_bytes((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8").encode("utf-32"))
    with pytest.raises(ConfigurationError) as raised:
        load_facts(facts)
    assert "UTF-32 text" in str(raised.value) and "`invoke doctor --json --output facts.json`" in raised.value.fix


# ---------------------------------------------------------------- the reader and its bound


@pytest.mark.parametrize("mark", [codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE], ids=["LE", "BE"])
def test_a_utf16_file_may_take_twice_the_bytes_of_the_bound(tmp_path: Path, mark: bytes) -> None:
    """The bound is the document's: 1,024 characters are within 1 KiB as UTF-8 and as UTF-16 (2,050 bytes with the
    mark); one more is refused in both, and the reader reads no further than the bound allows."""
    codec = "utf-16-le" if mark == codecs.BOM_UTF16_LE else "utf-16-be"
    file = tmp_path / "doc.json"
    for document, fits in (("[" + " " * 1022 + "]", True), ("[" + " " * 1023 + "]", False)):
        for data in (document.encode(), mark + document.encode(codec)):
            file.write_bytes(data)
            if fits:
                assert read_json(file, max_bytes=1024) == []
            else:
                with pytest.raises(BadJson, match="larger than 1 KiB"):
                    read_json(file, max_bytes=1024)
    file.write_bytes(mark + ("[" + " " * 10**6 + "]").encode(codec))
    with pytest.raises(BadJson, match=r"larger than 1 KiB \(2 KiB as UTF-16\)"):
        read_json(file, max_bytes=1024)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(codecs.BOM_UTF16_LE + b"[\x00\x00\xd8]\x00", "not UTF-16 text, though it starts", id="lone"),
        pytest.param(codecs.BOM_UTF16_LE + b"[\x00]", "not UTF-16 text", id="odd length"),
        pytest.param(codecs.BOM_UTF32_BE + "[]".encode("utf-32-be"), "UTF-32 text", id="UTF-32 BE"),
        pytest.param("[1]".encode("utf-16-be"), "holds NUL characters", id="UTF-16 without its mark"),
    ],
)
def test_the_reader_says_what_the_bytes_look_like(data: bytes, reason: str) -> None:
    with pytest.raises(BadJson, match=re.escape(reason)):
        parse_json(data)
