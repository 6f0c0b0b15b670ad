"""Keep credentials out of facts files, plans, logs and reports.

A value is redacted when its variable name says it is secret (TOKEN, PASSWORD, SECRET, KEY…)
or when the text itself carries one (a password in a URL, a bearer token, a GitHub/AWS token).
"""

from __future__ import annotations

import re

REDACTED = "***"

_SECRET_NAME = re.compile(r"(TOKEN|PASSWORD|PASSWD|SECRET|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH|CONNECTION_?STRING)", re.IGNORECASE)

_SECRET_PATTERNS = [
    # scheme://user:password@host → scheme://user:***@host
    (re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@\"']+:)(?P<secret>[^@\s/\"']+)(?P<tail>@)"), r"\g<head>" + REDACTED + r"\g<tail>"),
    # redis://:password@host (no user)
    (re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://:)(?P<secret>[^@\s/\"']+)(?P<tail>@)"), r"\g<head>" + REDACTED + r"\g<tail>"),
    (re.compile(r"(?P<head>\bBearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\g<head>" + REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), REDACTED),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"), REDACTED),
    (re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED),
    # Azure Storage connection strings (SCCACHE_AZURE_CONNECTION_STRING): AccountKey=…; SharedAccessSignature=…
    (re.compile(r"(?P<head>\b(?:AccountKey|SharedAccessSignature|SharedAccessKey)=)[^;\s\"']+"), r"\g<head>" + REDACTED),
    # ?token=…, &sig=…, &X-Amz-Signature=… in URLs
    (re.compile(r"(?P<head>[?&](?:token|access_token|sig|signature|x-amz-signature|x-amz-credential|password|key)=)[^&\s\"']+", re.IGNORECASE), r"\g<head>" + REDACTED),
]


def is_secret_name(name: str) -> bool:
    """True for variable names such as SCCACHE_REDIS_PASSWORD or GITHUB_TOKEN."""
    return bool(_SECRET_NAME.search(name))


def redact_text(text: str) -> str:
    """Replace every credential-looking substring of free text."""
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_value(name: str, value: str) -> str:
    """The value to show for an environment variable."""
    if is_secret_name(name) and value:
        return REDACTED
    return redact_text(value)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {name: redact_value(name, value) for name, value in env.items()}
