"""Keep credentials out of facts files, plans, logs, reports, summaries and the console.

Two layers, as CI systems mask secrets: exact values (of secret-looking variables, URL userinfo and what callers
`remember`; never shorter than MIN_SECRET_LENGTH, nor words like `true`), and patterns for credentials never in a
variable. A name is secret by whole parts (`is_secret_name`): TOKEN, PASSWORD, KEY... but not KEYBOARD_LAYOUT or
SCCACHE_GCS_KEY_PATH. The rules in full, and sccache's variables they cover: docs/architecture.md.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus, unquote

REDACTED = "***"

MIN_SECRET_LENGTH = 4  # shorter values are never masked as exact values (see the module's docstring)
NOT_SECRET_VALUES = frozenset(
    {
        "true",
        "false",
        "yes",
        "no",
        "none",
        "null",
        "nil",
        "on",
        "off",
        "undefined",
        "default",
        "enabled",
        "disabled",
        "auto",
    }
)

_SECRET_SUFFIXES = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CONNECTIONSTRING")
_SECRET_WORDS = frozenset(
    {
        "KEY",
        "AUTH",
        "APIKEY",
        "ACCESSKEY",
        "SECRETKEY",
        "PRIVATEKEY",
        "ACCOUNTKEY",
        "MASTERKEY",
        "SIGNINGKEY",
        "AUTHKEY",
        "SSHKEY",
        "CREDS",
        "PAT",
    }
)
_QUALIFIERS = frozenset({"PREFIX", "PATH", "FILE", "DIR", "NAME", "TYPE", "SOCK"})
_NAME_PARTS = re.compile(r"[_.\-]+")

# scheme://[user][:password]@host. The password may hold `/` (redis://:p4ss/w0rd@host) and `@`
# (the authority ends at its last `@` before the host); quotes, spaces and <> end a URL. The
# scheme is at most 32 characters, so a long line costs linear time, not quadratic.
_URL_USERINFO = re.compile(
    r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]{0,31}://)"
    r"(?P<user>[^\s/?#@:\"'<>]*)"
    r"(?::(?P<password>[^\s@\"'<>]*(?:@[^\s@/\"'<>]*)*))?"
    r"@(?=[^\s@\"'<>])"
)
# A whole value that is one URL whose userinfo holds a space or a tab (`https://user:s3cret PW@host/`),
# which _URL_USERINFO, made for free text where a space ends a URL, cannot see: the password runs to
# the last `@`, after which the host and path hold no space.
_SPACED_USERINFO = re.compile(
    r"\s*[a-zA-Z][a-zA-Z0-9+.-]{0,31}://(?P<user>[^/?#@:]*)(?::(?P<password>.*))?@(?P<host>[^\s@]*)\s*", re.DOTALL
)
_SSH_SCHEMES = frozenset({"ssh://", "git+ssh://", "ssh+git://", "sftp://", "scp://"})
_HOST_LIKE = re.compile(r"localhost|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+|\[[0-9A-Fa-f:.]+\]")

# (pattern, replacement, needles): a pattern runs only on text holding one of its needles (in
# lower case for the case-insensitive ones), so a plain compile line costs a few substring checks.
_SECRET_PATTERNS = [
    (
        re.compile(r"(?P<head>\bAuthorization:\s*(?:Basic|Bearer|token|Digest)\s+)[^\s\"']+", re.IGNORECASE),
        r"\g<head>" + REDACTED,
        ("authorization",),
    ),
    (re.compile(r"(?P<head>\bBearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\g<head>" + REDACTED, ("Bearer",)),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), REDACTED, ("gh",)),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"), REDACTED, ("github_pat_",)),
    (re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED, ("AKIA", "ASIA")),
    # Azure Storage connection strings (SCCACHE_AZURE_CONNECTION_STRING): AccountKey=…; SharedAccessSignature=…
    (
        re.compile(r"(?P<head>\b(?:AccountKey|SharedAccessSignature|SharedAccessKey)=)[^;\s\"']+"),
        r"\g<head>" + REDACTED,
        ("Key=", "Signature="),
    ),
    # ?token=…, &sig=…, &X-Amz-Signature=… in URLs
    (
        re.compile(
            r"(?P<head>[?&](?:token|access_token|sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|password|key)=)[^&\s\"']+",
            re.IGNORECASE,
        ),
        r"\g<head>" + REDACTED,
        ("?", "&"),
    ),
]
_CASELESS = {"authorization"}


def is_secret_name(name: str) -> bool:
    """True for variable names such as SCCACHE_REDIS_PASSWORD or GITHUB_TOKEN (the rule is in the module's
    docstring)."""
    parts = [part for part in _NAME_PARTS.split(name.upper()) if part]
    for index, part in enumerate(parts):
        following = parts[index + 1] if index + 1 < len(parts) else ""
        if part == "CONNECTION" and following == "STRING":
            secret = True
            following = parts[index + 2] if index + 2 < len(parts) else ""
        else:
            bare = part[:-1] if part.endswith("S") and len(part) > 3 else part
            secret = bare in _SECRET_WORDS or part in _SECRET_WORDS or bare.endswith(_SECRET_SUFFIXES)
        if secret and not (following in _QUALIFIERS or (part == "KEY" and following.isdigit())):
            return True
    return False


def _is_maskable(value: str) -> bool:
    return len(value) >= MIN_SECRET_LENGTH and value.lower() not in NOT_SECRET_VALUES and bool(value.strip(REDACTED))


def userinfo_secrets(text: str) -> Iterable[str]:
    """The password (or the lone user, a token) of every URL with userinfo in `text`."""
    for match in _URL_USERINFO.finditer(text):
        if _is_port_and_path(match):
            continue
        password = match.group("password")
        if password is not None:
            yield password
        elif match.group("scheme").lower() not in _SSH_SCHEMES:
            yield match.group("user")
    spaced = _SPACED_USERINFO.fullmatch(text)
    if spaced and any(char.isspace() for char in text[spaced.start("user") : spaced.start("host")]):
        yield spaced.group("password") if spaced.group("password") is not None else spaced.group("user")


def _is_port_and_path(match: re.Match[str]) -> bool:
    """`https://host:8443/path/x@y` is a host, a port and a path with an `@`, not userinfo."""
    password = match.group("password")
    if password is None or "/" not in password:
        return False
    return bool(_HOST_LIKE.fullmatch(match.group("user"))) and password.split("/", 1)[0].isdigit()


def _variants(value: str) -> set[str]:
    """The forms a secret takes in text: itself, each line, JSON-escaped, percent-encoded and -decoded."""
    forms = {value, value.strip()}
    forms.update(line.strip() for line in value.splitlines())
    for form in list(forms):
        forms.add(json.dumps(form)[1:-1])
        forms.add(json.dumps(form, ensure_ascii=False)[1:-1])
        forms.add(quote(form, safe=""))
        forms.add(quote_plus(form, safe=""))
        if "%" in form:
            forms.add(unquote(form))
    return {form for form in forms if _is_maskable(form)}


def secret_values(env: Mapping[str, str]) -> set[str]:
    """The exact values to mask that an environment holds: secret-named variables, URL userinfo."""
    found: set[str] = set()
    for name, value in env.items():
        if not isinstance(value, str) or not value:
            continue
        if is_secret_name(name):
            found.add(value)
        found.update(userinfo_secrets(value))
        match = re.fullmatch(r"GIT_CONFIG_KEY_(\d+)", name.upper())
        if match and re.search(r"extraheader|token|password|secret", value, re.IGNORECASE):
            paired = env.get(f"GIT_CONFIG_VALUE_{match.group(1)}")
            if paired:
                found.add(paired)
    return found


def _config_values(data: object, secret: bool = False) -> Iterable[str]:
    items = data.items if isinstance(data, Mapping) else getattr(data, "items", None)
    if callable(items):  # a Mapping, or mapping-like (Invoke's config is not a Mapping)
        pairs: Iterable[tuple[object, object]] = items()
        for key, value in pairs:
            yield from _config_values(value, secret or (isinstance(key, str) and is_secret_name(key)))
    elif isinstance(data, (list, tuple, set, frozenset)):
        for item in data:
            yield from _config_values(item, secret)
    elif isinstance(data, str):
        if secret:
            yield data
        yield from userinfo_secrets(data)


def _environ_snapshot() -> dict[bytes, bytes] | dict[str, str]:
    """What os.environ holds, cheaply: its raw mapping copied in C (about 1 µs) where CPython has one."""
    data = getattr(os.environ, "_data", None)
    return data.copy() if isinstance(data, dict) else dict(os.environ)


class _Masker:
    """The exact values, longest first, with the environment they were last read from."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._remembered: set[str] = set()
        self._environ: dict[bytes, bytes] | dict[str, str] | None = None
        self._from_environ: set[str] = set()
        self._values: tuple[str, ...] = ()

    def remember(self, values: Iterable[str]) -> None:
        with self._lock:
            added = set().union(*(_variants(value) for value in values if isinstance(value, str))) - self._remembered
            if added:
                self._remembered |= added
                self._rebuild()

    def forget(self) -> None:
        with self._lock:
            self._remembered.clear()
            self._environ = None
            self._rebuild()

    def values(self) -> tuple[str, ...]:
        """The values to mask now; the environment's part is collected again when it has changed."""
        snapshot = _environ_snapshot()
        if snapshot != self._environ:
            with self._lock:
                self._from_environ = set().union(*(_variants(value) for value in secret_values(dict(os.environ))))
                self._environ = snapshot
                self._rebuild()
        return self._values

    def _rebuild(self) -> None:
        self._values = tuple(sorted(self._remembered | self._from_environ, key=lambda value: (-len(value), value)))


_MASKER = _Masker()


def remember_secret(value: str) -> None:
    """Mask this exact value (and its encoded forms) in every later `redact_text`, like `::add-mask::`."""
    _MASKER.remember([value])


def remember_secrets(env: Mapping[str, str]) -> None:
    """Mask the secrets of an environment other than this process's (a build's composed environment)."""
    _MASKER.remember(secret_values(env))


def remember_config(config: object) -> None:
    """Mask the secrets of configuration (nested mappings/lists, Invoke's `c.config`): values under
    secret-named keys, URL userinfo."""
    _MASKER.remember(_config_values(config))


def longest_secret() -> int:
    """The length of the longest value masked now: text cut within that distance of its end may hold part of one."""
    values = _MASKER.values()
    return len(values[0]) if values else 0


def forget_secrets() -> None:
    """Drop the remembered values (tests); the environment's are read again on the next use."""
    _MASKER.forget()


def known_secret_count() -> int:
    """How many exact forms are masked now (for diagnostics; never the values)."""
    return len(_MASKER.values())


def mask_values(text: str, values: Iterable[str]) -> str:
    """Replace every occurrence of the values; overlapping occurrences become one `***`."""
    spans: list[tuple[int, int]] = []
    for value in values:
        start = text.find(value)
        while start != -1:
            spans.append((start, start + len(value)))
            start = text.find(value, start + 1)
    if not spans:
        return text
    spans.sort()
    pieces, position = [], 0
    merged_start, merged_end = spans[0]
    for start, end in spans[1:]:
        if start <= merged_end:
            merged_end = max(merged_end, end)
            continue
        pieces += [text[position:merged_start], REDACTED]
        position, (merged_start, merged_end) = merged_end, (start, end)
    pieces += [text[position:merged_start], REDACTED, text[merged_end:]]
    return "".join(pieces)


def _mask_userinfo(match: re.Match[str]) -> str:
    scheme, user, password = match.group("scheme"), match.group("user"), match.group("password")
    if _is_port_and_path(match):
        return match.group(0)
    if password is not None:
        return f"{scheme}{user}:{REDACTED}@"
    if scheme.lower() in _SSH_SCHEMES or not user or user == REDACTED:
        return match.group(0)
    return f"{scheme}{REDACTED}@"


def redact_text(text: str) -> str:
    """Replace every known secret value, then every credential-looking substring, of free text."""
    if not text:
        return text
    text = mask_values(text, _MASKER.values())
    if "@" in text:
        text = _URL_USERINFO.sub(_mask_userinfo, text)
    lowered = None
    for pattern, replacement, needles in _SECRET_PATTERNS:
        if needles[0] in _CASELESS:
            lowered = text.lower() if lowered is None else lowered
            haystack = lowered
        else:
            haystack = text
        if any(needle in haystack for needle in needles):
            text = pattern.sub(replacement, text)
            lowered = None
    return text


class StreamRedactor:
    """Masks text that arrives in arbitrary chunks (a pipe read with read1, a socket).

    A chunk can end in the middle of a secret, so text is held back until its line ends (`\\n`,
    or `\\r` with which progress redraws its line) and masked as a whole line. A line longer than
    `hold_limit` characters is let out early, all but a tail as long as the longest secret, so a
    secret cut by that boundary is still whole when the rest arrives.

        masker = StreamRedactor()
        for chunk in chunks:
            sys.stderr.write(masker.feed(chunk))
        sys.stderr.write(masker.flush())
    """

    def __init__(self, hold_limit: int = 65536) -> None:
        self._held = ""
        self._hold_limit = hold_limit

    def feed(self, text: str) -> str:
        """What of the text so far can be shown, masked; the rest waits for its line's end."""
        self._held += text
        end = max(self._held.rfind("\n"), self._held.rfind("\r"))
        out = ""
        if end != -1:
            out, self._held = redact_text(self._held[: end + 1]), self._held[end + 1 :]
        if len(self._held) > self._hold_limit:
            masked = redact_text(self._held)
            keep = max(256, max((len(value) for value in _MASKER.values()), default=0))
            out, self._held = out + masked[:-keep], masked[-keep:]
        return out

    def flush(self) -> str:
        """The rest, masked: call it when the stream ends."""
        out, self._held = redact_text(self._held), ""
        return out


def redact_value(name: str, value: str) -> str:
    """The value to show for an environment variable."""
    if is_secret_name(name) and value:
        return REDACTED
    return redact_text(value)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """An environment fit to show; its secrets are remembered, so text quoting them is masked too."""
    remember_secrets(env)
    return {name: redact_value(name, value) for name, value in env.items()}


def secret_variables_in(text: str) -> list[str]:
    """The names of this process's environment variables whose secret `text` holds, so that an error can say
    which secret it found without showing it."""
    return sorted(
        name
        for name, value in os.environ.items()
        if any(form in text for secret in secret_values({name: value}) for form in _variants(secret))
    )
