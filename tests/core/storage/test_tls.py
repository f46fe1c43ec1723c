"""A model behind TLS this machine does not trust by default, as behind a company's own
certificate authority: real TLS servers on loopback (``rclone serve http`` and ``rclone serve
s3`` with a self-signed certificate). Trusted through the variable users set for it
(SSL_CERT_FILE for an https:// file, AWS_CA_BUNDLE for S3), a load checksums as the file on
disk does; untrusted, one line says why and which variable trusts it."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelmon.core import measure, open_model, write_safetensors_model
from modelmon.core.errors import StorageError

from ...object_store import BUCKET, RcloneServer, aws_environment


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder served: its ``models`` folder is the bucket, with one model in it."""
    root = tmp_path_factory.mktemp("served")
    write_safetensors_model(root / BUCKET, layers=2, hidden=64, vocab=256, seed=21)
    return root


def _serve(kind: str, root: Path, certificate: tuple[Path, Path]) -> Iterator[str]:
    """``rclone serve KIND root`` over TLS on a loopback port; its https:// endpoint."""
    server = RcloneServer(root, kind, certificate).start()
    try:
        yield server.endpoint
    finally:
        server.stop()


@pytest.fixture
def https_endpoint(served: Path, certificate: tuple[Path, Path]) -> Iterator[str]:
    yield from _serve("http", served / BUCKET, certificate)


@pytest.fixture
def s3_endpoint(served: Path, certificate: tuple[Path, Path], tmp_path: Path) -> Iterator[str]:
    for endpoint in _serve("s3", served, certificate):
        with aws_environment(endpoint, tmp_path):
            yield endpoint


def _file_checksum(served: Path) -> str:
    result = measure(served / BUCKET / "model.safetensors", "sequential", verify=True)
    assert result.status == "ok" and result.checksum is not None
    return result.checksum


def test_an_https_file_behind_a_private_ca_loads_once_ssl_cert_file_trusts_it(
    https_endpoint: str,
    served: Path,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"{https_endpoint}/model.safetensors"
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(StorageError) as refused:
        open_model(url)
    assert "certificate verify failed" in str(refused.value)
    assert str(refused.value).endswith("name a bundle holding it in SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    result = measure(url, "ranged", verify=True, threads=2, chunk=64 << 10)
    assert result.status == "ok", result.error
    assert result.checksum == _file_checksum(served)


def test_a_bucket_behind_a_private_ca_loads_once_aws_ca_bundle_trusts_it(
    s3_endpoint: str,
    served: Path,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"s3://{BUCKET}/model.safetensors"
    with pytest.raises(StorageError) as refused:
        open_model(url)
    assert str(refused.value).endswith("name a bundle holding it in AWS_CA_BUNDLE")
    monkeypatch.setenv("AWS_CA_BUNDLE", str(certificate[0]))
    result = measure(url, "ranged", verify=True, threads=2, chunk=64 << 10)
    assert result.status == "ok", result.error
    assert result.checksum == _file_checksum(served)
