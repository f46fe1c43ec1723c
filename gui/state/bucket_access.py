"""Where the app's buckets are read from: an endpoint, and the AWS profile whose credentials
sign the requests, as File ▸ Open URL… names them. Qt-free.

The engine reads the AWS configuration as every AWS tool does (botocore's chain: the
environment, ``~/.aws/config`` and ``credentials``, ``AWS_PROFILE``). The app's choice goes
into its own process's environment, which every load and listing it starts reads:
``AWS_ENDPOINT_URL_S3`` (before a profile's ``endpoint_url`` and ``AWS_ENDPOINT_URL``) and
``AWS_PROFILE``. Naming a profile sets the environment's own keys (``AWS_ACCESS_KEY_ID``...)
aside for as long: botocore takes them before any profile, which would then not apply.
Emptied, each goes back to what the environment had.

The dialog's choice is on trial until its model opened (``try_access``, then ``settle``): a
failed open puts back the access the open model was read with, so its runs still read it.

Neither is a secret, and neither may hold one: an endpoint with ``user:password@`` or a
signed query is refused in one line that repeats none of it, and a profile is only a name
(of the AWS files, only their section headers are looked at here, never a key). So both may be kept
in the settings and shown anywhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from modelmon.core.errors import redact_url

ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL_S3"
PROFILE_VARIABLE = "AWS_PROFILE"
# The environment's own credentials: botocore takes them before a named profile.
KEY_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
SECTION = re.compile(r"\s*\[([^\]\n]+)\]\s*$")
HOST = re.compile(r"[A-Za-z0-9._-]+|[0-9A-Fa-f:.]+")
SERVER_ONLY = "write the server only, as http(s)://HOST[:PORT]"
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+=,-]{0,63}")
# Where the engine says a profile came from; a profile on trial came from the dialog.
PROFILE_FROM_ENVIRONMENT = "(AWS_PROFILE names it)"
PROFILE_FROM_DIALOG = "(File ▸ Open URL… names it)"


@dataclass(frozen=True, slots=True)
class Access:
    """The endpoint ("": the AWS configuration's) and profile ("": botocore's chain as it is)."""

    endpoint: str = ""
    profile: str = ""

    def words(self) -> str:
        """ "endpoint http://127.0.0.1:9000 · profile minio", or what is in force without."""
        endpoint = f"endpoint {self.endpoint}" if self.endpoint else "the configured endpoint"
        profile = f"profile {self.profile}" if self.profile else "the configured credentials"
        return f"{endpoint} · {profile}"


def check_endpoint(text: str) -> tuple[str | None, str | None]:
    """(the endpoint as kept, None), "" for none; or (None, why not, in one line that repeats
    nothing of the text: it may hold a credential)."""
    text = text.strip()
    if not text:
        return "", None
    try:
        parts = urlsplit(text)
        user, password, port = parts.username, parts.password, parts.port
    except ValueError:
        return None, f"Endpoint: {SERVER_ONLY}"
    if user is not None or password is not None or "@" in parts.netloc:
        return None, (
            "Endpoint: one with a user or password in it is refused; name the profile whose "
            "credentials sign the requests instead"
        )
    if parts.query or parts.fragment:
        return None, f"Endpoint: {SERVER_ONLY}, no query (a signed URL is refused)"
    host = parts.hostname or ""
    if (
        parts.scheme not in ("http", "https")
        or not HOST.fullmatch(host)
        or parts.path not in ("", "/")
    ):
        return None, f"Endpoint: {SERVER_ONLY}"
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown}" + (f":{port}" if port is not None else ""), None


def check_profile(text: str) -> tuple[str | None, str | None]:
    """(the profile's name, None), "" for none; or (None, why not)."""
    text = text.strip()
    if not text:
        return "", None
    if not PROFILE_NAME.fullmatch(text):
        return None, "Profile: a profile's name in ~/.aws (letters, digits, - _ .)"
    return text, None


def aws_profiles(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """The profiles named in the AWS config and credentials files: their section headers
    (``[name]``, ``[profile name]``), the only lines looked at."""
    environ = os.environ if environ is None else environ
    home = os.path.expanduser("~")
    config = environ.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config")
    keys = environ.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws", "credentials")
    found: set[str] = set()
    for path, prefix in ((config, "profile "), (keys, "")):
        try:
            with open(path, encoding="utf-8", errors="replace") as lines:
                headers = [SECTION.match(line) for line in lines]
        except OSError:
            continue
        for header in filter(None, headers):
            name = header.group(1).strip()
            name = name if name == "default" else name.removeprefix(prefix)
            if PROFILE_NAME.fullmatch(name):
                found.add(name)
    return sorted(found)


class BucketAccess:
    """The access in force (``current``) and the environment it was put into."""

    def __init__(self, environ: MutableMapping[str, str] | None = None) -> None:
        self.environ = os.environ if environ is None else environ
        self.current = Access()
        self._before: dict[str, str | None] = {}  # each variable changed: what it was
        self._ours: dict[str, str | None] = {}  # and what was put there (None: removed)
        self._before_trial: Access | None = None  # in force before the access on trial
        self._trial_url = ""  # the model the access on trial opens

    def try_access(self, access: Access, url: str) -> None:
        """Put ``access`` in force for opening ``url``; ``settle`` keeps it once that model
        opened, or puts back the access in force before."""
        if self._before_trial is None:
            self._before_trial = self.current
        self._trial_url = redact_url(url)  # as the opened model's facts name it
        self.apply(access)

    def settle(self, opened_url: str | None) -> Access | None:
        """An open ended (``opened_url``: the model that opened, as its facts name it; None:
        it failed or was not started). The access on trial when it opened ``opened_url``, now
        kept; else None, and the access before it is back in force. None too when nothing was
        on trial."""
        before, self._before_trial = self._before_trial, None
        if before is None:
            return None
        if opened_url is not None and opened_url == self._trial_url:
            return self.current
        self.apply(before)
        return None

    def failure_words(self, error: str) -> str:
        """``error`` naming where the profile came from, while the dialog's is on trial."""
        if self._before_trial is None or not self.current.profile:
            return error
        return error.replace(PROFILE_FROM_ENVIRONMENT, PROFILE_FROM_DIALOG)

    def apply(self, access: Access) -> None:
        """Put ``access`` in force (its parts checked by ``check_endpoint``/``check_profile``)."""
        self.restore()
        wanted: dict[str, str | None] = {}
        if access.endpoint:
            wanted[ENDPOINT_VARIABLE] = access.endpoint
        if access.profile:
            wanted[PROFILE_VARIABLE] = access.profile
            wanted.update(dict.fromkeys(KEY_VARIABLES))
        for name, value in wanted.items():
            self._before[name] = self.environ.get(name)
            if value is None:
                self.environ.pop(name, None)
            else:
                self.environ[name] = value
            self._ours[name] = value
        self.current = access

    def restore(self) -> None:
        """The environment as it was, where it still holds what was put there."""
        for name, ours in self._ours.items():
            if self.environ.get(name) != ours:
                continue  # changed since by someone else: theirs now
            before = self._before[name]
            if before is None:
                self.environ.pop(name, None)
            else:
                self.environ[name] = before
        self._before, self._ours = {}, {}
        self.current = Access()
