"""Credentials in URLs (``http://user:password@host``): never shown, in any message."""

from __future__ import annotations

import re
from urllib.parse import unquote

REDACTED = "***"
#: Secrets shorter than this are redacted where they stand alone, not inside other words.
SHORT_SECRET = 4
USERINFO_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)@")


def redact_url(url: str) -> str:
    """``url`` with its credentials replaced by ``***``: ``user:***@`` for a user and password,
    ``***@`` for a lone user part (which may be a token)."""
    match = USERINFO_RE.match(url)
    if match is None:
        return url
    user, colon, _ = match[2].partition(":")
    shown = f"{user}:{REDACTED}" if colon else REDACTED
    return f"{match[1]}{shown}@{url[match.end() :]}"


def without_password(url: str) -> tuple[str, bool]:
    """``url`` without the password of its user info (``user:secret@host`` becomes
    ``user@host``), and whether it had one. For database URLs, whose user is a name."""
    match = USERINFO_RE.match(url)
    if match is None:
        return url, False
    user, colon, _ = match[2].partition(":")
    if not colon:
        return url, False
    return f"{match[1]}{user}@{url[match.end() :]}", True


def url_secrets(url: str) -> list[str]:
    """The secret parts of a URL's user info (the password, or a lone user part), raw and
    percent-decoded."""
    match = USERINFO_RE.match(url)
    if match is None:
        return []
    user, colon, password = match[2].partition(":")
    return [password, unquote(password)] if colon else [user, unquote(user)]


def scrub(text: str, url: str, extra: list[str] | None = None) -> str:
    """``text`` with ``url`` shown redacted and every secret of it (and ``extra``) as ``***``."""
    text = text.replace(url, redact_url(url))
    secrets = url_secrets(url) + list(extra or [])
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if len(secret) >= SHORT_SECRET:
            text = text.replace(secret, REDACTED)
        else:  # a password "p" replaced inside every word would turn http:// into htt***://
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", REDACTED, text)
    return text
