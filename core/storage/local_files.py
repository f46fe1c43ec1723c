"""The files on this machine a run reads to reach a bucket or a host: botocore's shared
credentials and config files, and the certificate bundles and token file the environment
names. They are inputs of the run as much as the model's objects are: the output guard
(``system.outputs``) never lets a report replace one (``Model.paths`` lists them).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

# storage kind -> the variables naming a file its client reads, with the default where the
# client reads one without being told (botocore: ~/.aws/credentials and ~/.aws/config).
FILES_READ: dict[str, tuple[tuple[str, str | None], ...]] = {
    "s3": (
        ("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials"),
        ("AWS_CONFIG_FILE", "~/.aws/config"),
        ("AWS_CA_BUNDLE", None),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", None),
        ("SSL_CERT_FILE", None),
    ),
    "https": (("SSL_CERT_FILE", None),),
}


def files_read_to_reach(
    storages: Iterable[str], environ: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The local files the clients of ``storages`` ("s3", "https", "http") read, by the
    environment (``os.environ`` unless given), each once."""
    env = os.environ if environ is None else environ
    found: dict[str, None] = {}
    for storage in dict.fromkeys(storages):
        for variable, default in FILES_READ.get(storage, ()):
            named = env.get(variable) or default
            if named:
                found[os.path.expanduser(named)] = None
    return tuple(found)
