"""Certificates made at test time for the local cluster's TLS listeners (``LocalKafka(tls=True)``).

``make_test_pki(folder)`` writes, in a fraction of a second (EC P-256 keys, Python's
``cryptography``, a test dependency in ``setup.py``):

- a test CA (``ca.pem``), and an unrelated CA (``other-ca.pem``) a client may wrongly trust;
- broker keystores (PKCS12, one password): ``broker.p12`` valid for ``IP:127.0.0.1`` and
  ``DNS:localhost``; ``broker-wrong-host.p12`` valid only for ``DNS:kafka.invalid`` (a hostname
  mismatch); ``broker-expired.p12`` valid for 127.0.0.1 but expired yesterday;
- client certificates for mutual TLS, subject ``CN=<user>,O=spark-purge-test`` (the brokers map
  it to ``User:<user>``, see :data:`PRINCIPAL_MAPPING_RULES`): ``client.pem`` with its key
  ``client.key`` (encrypted PKCS#8, ``key_password``), ``client-expired.pem`` / ``.key`` (same
  key password, expired yesterday), and ``client-other-ca.pem`` / ``.key`` (signed by the
  unrelated CA).

Passwords are random per call, so a leak check can look for them. Nothing here is secure beyond
a test: keys live unencrypted in memory and the CA key is thrown away.
"""
from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ORGANIZATION = "spark-purge-test"
#: ``ssl.principal.mapping.rules`` for the brokers: ``CN=<user>,O=spark-purge-test`` -> ``User:<user>``.
PRINCIPAL_MAPPING_RULES = rf"RULE:^CN=([^,]+),O={ORGANIZATION}$/$1/,DEFAULT"
WRONG_HOST = "kafka.invalid"


@dataclass(frozen=True)
class TestPki:
    """Paths of the files ``make_test_pki`` wrote, and their passwords (masked in ``repr``)."""

    __test__ = False  # not a pytest test class

    directory: Path
    ca: Path
    other_ca: Path
    broker_keystore: Path
    broker_wrong_host_keystore: Path
    broker_expired_keystore: Path
    client_cert: Path
    client_key: Path
    client_expired_cert: Path
    client_expired_key: Path
    client_other_ca_cert: Path
    client_other_ca_key: Path
    tls_user: str
    keystore_password: str = field(repr=False)
    key_password: str = field(repr=False)

    @property
    def passwords(self) -> tuple[str, str]:
        return (self.keystore_password, self.key_password)


class _Authority:
    def __init__(self, name: str, now: datetime) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION), x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            _builder(self.name, self.name, self.key.public_key(), now - timedelta(days=30), now + timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self.key, hashes.SHA256())
        )

    def issue(
        self,
        common_name: str,
        not_before: datetime,
        not_after: datetime,
        server_names: tuple[str, ...] = (),
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(
            [x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION), x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        )
        usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server_names else [ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = _builder(subject, self.name, key.public_key(), not_before, not_after).add_extension(
            x509.ExtendedKeyUsage(usage), critical=False
        )
        if server_names:
            builder = builder.add_extension(x509.SubjectAlternativeName([_san(n) for n in server_names]), critical=False)
        return key, builder.sign(self.key, hashes.SHA256())


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, start: datetime, end: datetime) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
    )


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_test_pki(directory: Path, tls_user: str = "purger-tls") -> TestPki:
    """Write a test CA, an unrelated CA, broker keystores and client certificates into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.now(timezone.utc)
    ca, other = _Authority("spark-purge test CA", now), _Authority("unrelated CA", now)
    valid = (now - timedelta(days=1), now + timedelta(days=30))
    expired = (now - timedelta(days=10), now - timedelta(days=1))
    keystore_password = f"keystore-pw-{secrets.token_hex(12)}"
    key_password = f"key-pw-{secrets.token_hex(12)}"
    paths: dict[str, Path] = {}

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    paths["ca"] = write("ca.pem", _pem(ca.cert))
    paths["other_ca"] = write("other-ca.pem", _pem(other.cert))
    for field_name, file_name, names, when in (
        ("broker_keystore", "broker.p12", ("127.0.0.1", "localhost"), valid),
        ("broker_wrong_host_keystore", "broker-wrong-host.p12", (WRONG_HOST,), valid),
        ("broker_expired_keystore", "broker-expired.p12", ("127.0.0.1", "localhost"), expired),
    ):
        key, cert = ca.issue("localhost", *when, server_names=names)
        store = pkcs12.serialize_key_and_certificates(
            b"broker", key, cert, [ca.cert], serialization.BestAvailableEncryption(keystore_password.encode())
        )
        paths[field_name] = write(file_name, store)
    encrypted = serialization.BestAvailableEncryption(key_password.encode())
    for prefix, authority, when in (("client", ca, valid), ("client_expired", ca, expired), ("client_other_ca", other, valid)):
        key, cert = authority.issue(tls_user, *when)
        stem = prefix.replace("_", "-")
        paths[f"{prefix}_cert"] = write(f"{stem}.pem", _pem(cert))
        paths[f"{prefix}_key"] = write(
            f"{stem}.key", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encrypted)
        )
    return TestPki(
        directory=directory, tls_user=tls_user, keystore_password=keystore_password, key_password=key_password, **paths
    )


__all__ = ["PRINCIPAL_MAPPING_RULES", "WRONG_HOST", "TestPki", "make_test_pki"]
