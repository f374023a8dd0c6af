"""TLS without a broker: the client context's file checks (each naming its setting, no password
echoed, no pass-phrase prompt), certificate dates read from PEM, how a failed handshake is
worded, and that an unreachable server is retried until the request timeout, not forever.

The certificates come from ``spark_purge.testing.tls`` (the ones the TLS test listeners use)."""
from __future__ import annotations

import socket
import ssl
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography import x509

from spark_purge.errors import ClusterUnreachable, ConfigError, TlsHandshakeError, from_spark_exception
from spark_purge.kafka import tls
from spark_purge.kafka.settings import ConnectionSettings
from spark_purge.testing.tls import TestPki, make_test_pki

SERVER = "127.0.0.1:9093"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


def _settings(pki: TestPki, **override: object) -> ConnectionSettings:
    values: dict[str, object] = {
        "bootstrap_servers": SERVER,
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.ca),
        "ssl_certfile": str(pki.client_cert),
        "ssl_keyfile": str(pki.client_key),
        "ssl_password": pki.key_password,
    }
    values.update(override)
    return ConnectionSettings(**values)  # type: ignore[arg-type]


def test_context_loads_the_ca_and_the_client_key_pair(pki: TestPki) -> None:
    ctx = tls.ssl_context(_settings(pki))
    assert ctx.cert_store_stats()["x509_ca"] == 1
    assert ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert not tls.ssl_context(_settings(pki, ssl_check_hostname=False)).check_hostname


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"ssl_cafile": "/nonexistent/ca.pem"}, "kafka.security.ssl_cafile: cannot read /nonexistent/ca.pem: No such file"),
        ({"ssl_cafile": "client_key"}, "kafka.security.ssl_cafile: no PEM CA certificate in"),
        ({"ssl_certfile": "/nonexistent/c.pem"}, "kafka.security.ssl_certfile: cannot read /nonexistent/c.pem"),
        ({"ssl_certfile": "client_key"}, "kafka.security.ssl_certfile: no PEM certificate in"),
        ({"ssl_keyfile": "ca"}, "kafka.security.ssl_keyfile: no PEM private key in"),
        ({"ssl_keyfile": None}, "kafka.security.ssl_certfile: no PEM private key in"),
        ({"ssl_keyfile": "client_expired_key"}, "kafka.security.ssl_keyfile: the private key does not belong to the certificate"),
        ({"ssl_password": "not-the-key-password"}, "kafka.security.ssl_password: does not decrypt the private key in kafka.security.ssl_keyfile"),
        # OpenSSL would prompt for a pass phrase on the terminal: an error instead.
        ({"ssl_password": None}, "kafka.security.ssl_keyfile: the private key is encrypted and kafka.security.ssl_password is not set"),
        ({"ssl_certfile": None}, "kafka.security.ssl_keyfile: set without kafka.security.ssl_certfile"),
    ],
)
def test_an_unusable_file_is_a_config_error_naming_its_setting(pki: TestPki, override: dict[str, object], expected: str) -> None:
    files = {k: (str(getattr(pki, v)) if isinstance(v, str) and hasattr(pki, v) else v) for k, v in override.items()}
    with pytest.raises(ConfigError) as err:
        tls.ssl_context(_settings(pki, **files))
    assert str(err.value).startswith(expected), str(err.value)
    for secret in (*pki.passwords, "not-the-key-password"):
        assert secret not in str(err.value)


@pytest.mark.parametrize("name", ["client_cert", "client_expired_cert", "ca"])
def test_certificate_validity_reads_the_pem_dates(pki: TestPki, name: str) -> None:
    path: Path = getattr(pki, name)
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    assert tls.certificate_validity(path.read_text()) == (cert.not_valid_before_utc, cert.not_valid_after_utc)


def test_certificate_validity_of_no_certificate_is_none(pki: TestPki) -> None:
    assert tls.certificate_validity(pki.client_key.read_text()) is None
    assert tls.certificate_validity("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----") is None
    assert tls.certificate_validity("") is None


def _verify_error(code: int, message: str) -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, f"certificate verify failed: {message}")
    exc.verify_code, exc.verify_message = code, message
    return exc


def _alert(reason: str) -> ssl.SSLError:
    exc = ssl.SSLError(1, f"[SSL: {reason}]")
    exc.reason = reason
    return exc


@pytest.mark.parametrize(
    ("exc", "override", "expected"),
    [
        (_verify_error(19, "self-signed certificate in certificate chain"), {},
         "the broker's certificate is not signed by a CA in kafka.security.ssl_cafile ("),
        (_verify_error(20, "unable to get local issuer certificate"), {"ssl_cafile": None},
         "not signed by a CA in the system's CAs (kafka.security.ssl_cafile is not set)"),
        (_verify_error(64, "IP address mismatch"), {}, "not valid for 127.0.0.1 (IP address mismatch); kafka.security.ssl_check_hostname is true"),
        (_verify_error(62, "hostname mismatch"), {}, "kafka.security.ssl_check_hostname is true"),
        (_verify_error(10, "certificate has expired"), {}, "the broker's certificate has expired"),
        (_verify_error(9, "certificate is not yet valid"), {}, "the broker's certificate is not valid yet"),
        (_alert("SSLV3_ALERT_BAD_CERTIFICATE"), {"ssl_certfile": None, "ssl_keyfile": None},
         "the broker requires a client certificate (mutual TLS, alert SSLV3_ALERT_BAD_CERTIFICATE): set kafka.security.ssl_certfile"),
        (_alert("TLSV1_ALERT_UNKNOWN_CA"), {}, "the broker refused the client certificate in kafka.security.ssl_certfile ("),
        (ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), {}, "the server does not speak TLS there"),
    ],
)
def test_handshake_failures_name_the_setting(pki: TestPki, exc: BaseException, override: dict[str, object], expected: str) -> None:
    failure = tls.tls_failure(exc, SERVER, _settings(pki, **override))
    assert isinstance(failure, TlsHandshakeError) and not failure.retriable
    assert str(failure).startswith(f"TLS handshake with {SERVER} failed: ")
    assert expected in str(failure), str(failure)


def test_a_refused_client_certificate_says_when_it_expired(pki: TestPki) -> None:
    settings = _settings(pki, ssl_certfile=str(pki.client_expired_cert), ssl_keyfile=str(pki.client_expired_key))
    expired_on = x509.load_pem_x509_certificate(pki.client_expired_cert.read_bytes()).not_valid_after_utc
    failure = tls.tls_failure(_alert("SSLV3_ALERT_CERTIFICATE_UNKNOWN"), SERVER, settings)
    assert f"it expired on {expired_on:%Y-%m-%d %H:%M:%S} UTC" in str(failure)
    # The same certificate, judged the day before it expired: another reason is suggested.
    earlier = tls.tls_failure(_alert("SSLV3_ALERT_CERTIFICATE_UNKNOWN"), SERVER, settings, now=lambda: expired_on - timedelta(hours=1))
    assert "it expired on" not in str(earlier) and "signed by a CA the broker trusts" in str(earlier)


@pytest.mark.parametrize("exc", [ConnectionRefusedError(111, "refused"), TimeoutError("timed out"), ConnectionResetError(104, "reset")])
def test_an_unreachable_server_is_worth_retrying(pki: TestPki, exc: OSError) -> None:
    assert tls.tls_failure(exc, SERVER, _settings(pki)) is None


def test_unreachable_servers_are_retried_until_the_request_timeout(pki: TestPki) -> None:
    tried: list[tuple[str, int]] = []

    def refuse(address: tuple[str, int], timeout: float) -> socket.socket:
        tried.append(address)
        raise ConnectionRefusedError(111, "Connection refused")

    settings = _settings(pki, bootstrap_servers="127.0.0.1:1,127.0.0.1:2", request_timeout_ms=400)
    with pytest.raises(ClusterUnreachable, match=r"no Kafka broker answered at 127.0.0.1:1,127.0.0.1:2 within 400 ms \(ConnectionRefusedError\)"):
        tls.check_handshake(settings, tls.ssl_context(settings), connect=refuse)
    assert {port for _, port in tried} == {1, 2} and len(tried) >= 4  # both servers, more than once


def test_a_hung_server_does_not_use_up_the_others_time(pki: TestPki) -> None:
    """A server that accepts TCP and then says nothing (a broker stopped with SIGSTOP) gets its
    share of the request timeout; the next server is still tried."""
    tried: list[int] = []
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # the kernel completes the TCP handshake; nobody ever answers
        hung_port = hung.getsockname()[1]

        def connect(address: tuple[str, int], timeout: float) -> socket.socket:
            tried.append(address[1])
            if address[1] != hung_port:
                raise ConnectionRefusedError(111, "Connection refused")
            return socket.create_connection(address, timeout)

        settings = _settings(pki, bootstrap_servers=f"127.0.0.1:{hung_port},127.0.0.1:1", request_timeout_ms=2000)
        with pytest.raises(ClusterUnreachable):
            tls.check_handshake(settings, tls.ssl_context(settings), connect=connect)
    assert tried[:2] == [hung_port, 1], tried


def test_a_certificate_failure_is_not_retried(pki: TestPki) -> None:
    calls = []

    def failing(address: tuple[str, int], timeout: float) -> socket.socket:
        calls.append(address)
        raise _verify_error(10, "certificate has expired")

    settings = _settings(pki, bootstrap_servers="127.0.0.1:1,127.0.0.1:2", request_timeout_ms=60_000)
    with pytest.raises(TlsHandshakeError, match="has expired"):
        tls.check_handshake(settings, tls.ssl_context(settings), connect=failing)
    assert calls == [("127.0.0.1", 1)]


def test_the_error_survives_sparks_wrapping() -> None:
    wrapped = Exception("Py4JJavaError ...\nspark_purge.errors.TlsHandshakeError: TLS handshake with h:1 failed: x\n  at ...")
    found = from_spark_exception(wrapped)
    assert isinstance(found, TlsHandshakeError) and str(found) == "TLS handshake with h:1 failed: x"


def test_uses_tls_only_for_the_tls_protocols() -> None:
    protocols = {p: tls.uses_tls(ConnectionSettings(SERVER, security_protocol=p)) for p in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")}
    assert protocols == {"PLAINTEXT": False, "SASL_PLAINTEXT": False, "SSL": True, "SASL_SSL": True}
