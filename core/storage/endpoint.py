"""Where s3:// requests go, and as which region, as the AWS configuration sets them, read
before botocore sees them: which variable or profile set each (every refusal names it),
and an endpoint modelmon can use, ``http(s)://HOST[:PORT][/PATH]``.

An endpoint with a user part, a query or a fragment is refused, whatever it holds: botocore
sends no user part and takes no query, and what either holds may be a credential. A refusal
repeats only what was checked to be a scheme, a host and a port, never the rest.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from typing import Any

from modelmon.core.errors import StorageConfigError

DEFAULT_REGION = "us-east-1"  # what S3's global endpoint and most S3-compatible servers sign
# Where botocore looks for an s3 endpoint, first to last (its ConfiguredEndpointProvider).
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
# AWS_REGION first, as the AWS CLI and every other SDK read it (botocore reads only
# AWS_DEFAULT_REGION and the profile's region).
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_AUTHORITY = re.compile(r"(?P<host>[A-Za-z0-9._-]+|\[(?P<ipv6>[0-9A-Fa-f:.]+)\])(?::(?P<port>.*))?")
_REGION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")  # botocore's check


@dataclass(frozen=True, slots=True)
class Setting:
    """A value of the AWS configuration and what set it ("AWS_ENDPOINT_URL", "profile
    research's endpoint_url in ~/.aws/config"); ``value`` None where nothing did."""

    value: str | None
    source: str


def configured_endpoint(session: Any) -> Setting:
    """The s3 endpoint the configuration names, looked for where botocore looks."""
    if session.get_config_variable("ignore_configured_endpoint_urls"):
        return Setting(None, "none (AWS_IGNORE_CONFIGURED_ENDPOINT_URLS)")
    for name in ENDPOINT_VARIABLES:
        if value := os.environ.get(name):
            return Setting(value, name)
    scoped = session.get_scoped_config()
    config_file = session.get_config_variable("config_file")
    services = scoped.get("services")
    if services:
        section = session.full_config.get("services", {}).get(services, {})
        s3 = section.get("s3") if isinstance(section, dict) else None
        value = s3.get("endpoint_url") if isinstance(s3, dict) else None
        if value:
            return Setting(value, f"the s3 endpoint_url of [services {services}] in {config_file}")
    if value := scoped.get("endpoint_url"):
        return Setting(value, f"{_profile(session)}'s endpoint_url in {config_file}")
    return Setting(None, "none: AWS's")


def configured_region(session: Any) -> Setting:
    """The region requests are signed for, and what set it; the default where none did."""
    for name in REGION_VARIABLES:
        if value := os.environ.get(name):
            return _checked_region(Setting(value, name))
    if value := session.get_scoped_config().get("region"):
        return _checked_region(Setting(value, f"{_profile(session)}'s region"))
    return Setting(DEFAULT_REGION, "none set, so the default")


def _checked_region(region: Setting) -> Setting:
    if not _REGION.fullmatch(region.value or ""):
        raise StorageConfigError(
            region.source, "not a region's name (letters, digits and -, as us-east-1)"
        )
    return region


def check_endpoint(endpoint: Setting) -> None:
    """Refuse, in one line naming what set it, an endpoint modelmon cannot use."""
    value, source = endpoint.value or "", endpoint.source
    for mark, what in (("@", "a user part (credentials)"), ("?", "a query"), ("#", "a fragment")):
        if mark in value:
            raise StorageConfigError(
                source,
                f"the endpoint URL holds {what}, which is not repeated here: an endpoint is "
                "http(s)://HOST[:PORT][/PATH]; credentials go in AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY or a profile",
            )
    if not value.isprintable() or any(char.isspace() for char in value):
        raise StorageConfigError(source, "the endpoint URL holds a space or a control character")
    scheme, separator, rest = value.partition("://")
    if not separator or not _SCHEME.fullmatch(scheme):
        raise StorageConfigError(
            source,
            "the endpoint URL has no scheme: write it "
            f"{_suggestion(value)} (or https://, as the server speaks)",
        )
    if scheme.lower() not in ("http", "https"):
        raise StorageConfigError(
            source, f"the endpoint URL is {scheme}://: an S3 endpoint is http:// or https://"
        )
    authority = rest.partition("/")[0]
    found = _AUTHORITY.fullmatch(authority)
    if found is None or (found["ipv6"] and not _is_ipv6(found["ipv6"])):
        raise StorageConfigError(
            source,
            f"the endpoint URL has no HOST[:PORT] after {scheme}:// (an IPv6 address is "
            "written in closed brackets: [::1]:9000)",
        )
    port = found["port"]
    if port is not None and not (port.isdigit() and port.isascii() and 0 < int(port) < 65536):
        where = f"{scheme}://{found['host']}"
        if port.isdigit() and port.isascii() and len(port) < 12:
            raise StorageConfigError(
                source, f"the endpoint {where}:{port}: its port is not one of 1 to 65535"
            )
        # Repeated only when short: what follows the colon is no number, and a long one may
        # be anything (a key pasted into the wrong variable); a typo ("9557x") is shown.
        typo = port.isascii() and port.isalnum() and len(port) <= 8
        raise StorageConfigError(
            source,
            f"the endpoint {where}{':' + port if typo else ''}: its port is not a number from 1 "
            "to 65535",
        )


def _suggestion(value: str) -> str:
    """``http://VALUE`` where the value is a host[:port] that is surely no secret (an
    address, a dotted name, localhost), else ``http://HOST:PORT``."""
    found = _AUTHORITY.fullmatch(value)
    host = found["host"] if found else ""
    port = found["port"] if found else None
    dotted = "." in host or host.startswith("[") or host == "localhost"
    if found and dotted and (port is None or (port.isdigit() and len(port) <= 5)):
        return f"http://{value}"
    return "http://HOST:PORT"


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _profile(session: Any) -> str:
    return f"profile {session.get_config_variable('profile') or 'default'}"


def credential_places(session: Any) -> str:
    """Where botocore looked for credentials, for a line that says none were found."""
    profile = _profile(session)
    files = (
        f"{session.get_config_variable('credentials_file')} and "
        f"{session.get_config_variable('config_file')}"
    )
    return f"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, {profile} in {files}, SSO, roles"
