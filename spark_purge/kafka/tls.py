"""TLS for the ``SSL`` and ``SASL_SSL`` protocols: one ``ssl.SSLContext`` built from the
settings, and a first handshake that says what is wrong in words that name the setting.

``ssl_context(settings)`` builds the context kafka-python then uses for every connection (it
takes it as ``ssl_context``), so each file is read once and a bad one fails here, as a
``ConfigError`` naming its key (exit 2): an unreadable or empty ``ssl_cafile``, an
``ssl_certfile`` without a certificate, an ``ssl_keyfile`` that is not the certificate's key, an
``ssl_password`` that does not decrypt it — and an encrypted key without ``ssl_password`` is an
error, never OpenSSL's pass-phrase prompt on the terminal.

``check_handshake(settings, context)`` then opens one TLS connection to a bootstrap server and
sends ApiVersions over it (a broker refuses a client certificate only after a TLS 1.3 client
thinks the handshake is done). kafka-python would retry a failed handshake until its bootstrap
timeout and report only that no broker answered; here a certificate problem fails at once as a
``TlsHandshakeError`` (a ``KafkaError``, exit 3) naming the setting at fault:

- the broker's certificate is not signed by a CA in ``kafka.security.ssl_cafile``;
- it is not valid for the host in ``bootstrap_servers`` (``kafka.security.ssl_check_hostname``);
- it has expired or is not valid yet (the broker's ``ssl.keystore.location``);
- the broker refused the client certificate (``kafka.security.ssl_certfile``: expired — read
  from the file — or signed by a CA it does not trust), or wanted one and got none;
- the server closed the connection during the handshake (``kafka.security.protocol``: not a
  TLS listener?).

A server that cannot be reached (refused, timed out) is tried again, every bootstrap server in
turn, until ``request_timeout_ms``; then ``ClusterUnreachable``, as without TLS.

Settings are named by their config keys (``kafka.security.ssl_cafile``; the ``kafka_state``
data source spells the same settings ``kafka.ssl_cafile``). Passwords never appear in a message.
"""
from __future__ import annotations

import base64
import binascii
import logging
import socket
import ssl
import struct
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Optional, Union

from spark_purge._time import Backoff, Deadline
from spark_purge.errors import ClusterUnreachable, ConfigError, TlsHandshakeError
from spark_purge.kafka.settings import ConnectionSettings

log = logging.getLogger(__name__)

#: The config key of each setting a TLS message may name.
SETTING_KEYS = {
    "security_protocol": "kafka.security.protocol",
    "ssl_cafile": "kafka.security.ssl_cafile",
    "ssl_certfile": "kafka.security.ssl_certfile",
    "ssl_keyfile": "kafka.security.ssl_keyfile",
    "ssl_password": "kafka.security.ssl_password",
    "ssl_check_hostname": "kafka.security.ssl_check_hostname",
    "ssl_crlfile": "kafka.ssl_crlfile",  # a data-source option only
}
_CAFILE, _CERTFILE, _KEYFILE = SETTING_KEYS["ssl_cafile"], SETTING_KEYS["ssl_certfile"], SETTING_KEYS["ssl_keyfile"]
_PASSWORD, _HOSTNAME, _PROTOCOL = SETTING_KEYS["ssl_password"], SETTING_KEYS["ssl_check_hostname"], SETTING_KEYS["security_protocol"]

# OpenSSL's X509_V_ERR_* codes a broker certificate fails with (ssl.SSLCertVerificationError.verify_code).
_HOSTNAME_MISMATCH = frozenset({62, 63, 64})  # host name, e-mail, IP address mismatch
_EXPIRED, _NOT_YET_VALID = 10, 9
_UNTRUSTED = frozenset({2, 7, 18, 19, 20, 21})  # no issuer, bad signature, self-signed, unknown local issuer
# TLS alerts a broker sends when it refuses (or wanted) the client's certificate.
_CLIENT_CERT_ALERTS = frozenset(
    {
        "SSLV3_ALERT_BAD_CERTIFICATE",
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
        "SSLV3_ALERT_CERTIFICATE_EXPIRED",
        "SSLV3_ALERT_CERTIFICATE_REVOKED",
        "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
        "TLSV1_ALERT_UNKNOWN_CA",
        "TLSV1_ALERT_ACCESS_DENIED",
        "TLSV13_ALERT_CERTIFICATE_REQUIRED",
    }
)
# What OpenSSL says when the other side answers a ClientHello with something that is not TLS.
_NOT_TLS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "UNEXPECTED_EOF_WHILE_READING"})
_API_VERSIONS_KEY = 18


class _PasswordMissing(Exception):
    """OpenSSL asked for the key's pass phrase and the settings have none."""


# ---- the context -------------------------------------------------------------------------------


def ssl_context(settings: ConnectionSettings) -> ssl.SSLContext:
    """The client's TLS context (TLS 1.2+, the CA file or the system's CAs, the client key pair);
    raises ``ConfigError`` naming the setting whose file cannot be used."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = settings.ssl_check_hostname
    if settings.ssl_cafile:
        _readable(settings.ssl_cafile, _CAFILE)
        try:
            ctx.load_verify_locations(cafile=settings.ssl_cafile)
        except ssl.SSLError as exc:
            raise ConfigError(f"{_CAFILE}: no PEM CA certificate in {settings.ssl_cafile} ({_reason(exc)})") from None
    else:
        ctx.load_default_certs()
    if settings.ssl_certfile:
        _load_key_pair(ctx, settings)
    elif settings.ssl_keyfile:
        raise ConfigError(f"{_KEYFILE}: set without {_CERTFILE} (the client certificate it is the key of)")
    if settings.ssl_crlfile:
        crl_key = SETTING_KEYS["ssl_crlfile"]
        _readable(settings.ssl_crlfile, crl_key)
        try:
            ctx.load_verify_locations(cafile=settings.ssl_crlfile)
        except ssl.SSLError as exc:
            raise ConfigError(f"{crl_key}: no PEM CRL in {settings.ssl_crlfile} ({_reason(exc)})") from None
        ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    return ctx


def _load_key_pair(ctx: ssl.SSLContext, settings: ConnectionSettings) -> None:
    certfile, keyfile = settings.ssl_certfile, settings.ssl_keyfile
    assert certfile is not None
    cert_text = _readable(certfile, _CERTFILE)
    if "-----BEGIN CERTIFICATE-----" not in cert_text:
        raise ConfigError(f"{_CERTFILE}: no PEM certificate in {certfile}")
    key_text, key_key = (_readable(keyfile, _KEYFILE), _KEYFILE) if keyfile else (cert_text, _CERTFILE)
    if "PRIVATE KEY-----" not in key_text:
        where = f"in {keyfile}" if keyfile else f"in {certfile}, and {_KEYFILE} is not set"
        raise ConfigError(f"{key_key}: no PEM private key {where}")
    asked = []

    def password() -> Union[str, bytes]:
        asked.append(True)
        if settings.ssl_password is None:
            raise _PasswordMissing()
        return settings.ssl_password

    try:
        ctx.load_cert_chain(certfile=certfile, keyfile=keyfile, password=password)
    except _PasswordMissing:
        raise ConfigError(f"{key_key}: the private key is encrypted and {_PASSWORD} is not set") from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise ConfigError(f"{key_key}: the private key does not belong to the certificate in {_CERTFILE}") from None
        if asked:
            raise ConfigError(f"{_PASSWORD}: does not decrypt the private key in {key_key} ({keyfile or certfile})") from None
        raise ConfigError(f"{key_key}: cannot load the client key pair from {keyfile or certfile} ({_reason(exc)})") from None


def _readable(path: str, key: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror or type(exc).__name__}") from None


def _reason(exc: ssl.SSLError) -> str:
    return str(exc.reason or exc.strerror or type(exc).__name__)


# ---- certificate dates -------------------------------------------------------------------------


def certificate_validity(pem: str) -> Optional[tuple[datetime, datetime]]:
    """(notBefore, notAfter) of the first certificate in ``pem`` text, UTC; None if unreadable.

    A minimal DER walk (the standard library has no public certificate parser):
    Certificate -> tbsCertificate -> [version], serial, signature, issuer, validity.
    """
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = pem.find(begin)
    stop = pem.find(end, start)
    if start < 0 or stop < 0:
        return None
    try:
        der = base64.b64decode("".join(pem[start + len(begin):stop].split()), validate=True)
        _, body = _tlv(der, 0)                      # Certificate
        _, tbs = _tlv(der, body[0])                 # tbsCertificate
        pos = tbs[0]
        if der[pos] == 0xA0:                        # [0] version
            pos = _tlv(der, pos)[1][1]
        for _field in range(3):                     # serial, signature, issuer
            pos = _tlv(der, pos)[1][1]
        tag, validity = _tlv(der, pos)
        if tag != 0x30:
            return None
        tag1, first = _tlv(der, validity[0])
        tag2, second = _tlv(der, first[1])
        return _der_time(tag1, der[first[0]:first[1]]), _der_time(tag2, der[second[0]:second[1]])
    except (binascii.Error, IndexError, ValueError):
        return None


def _tlv(der: bytes, pos: int) -> tuple[int, tuple[int, int]]:
    """(tag, (content start, content end)) of the DER element at ``pos``."""
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(der[pos:pos + count], "big")
        pos += count
    if pos + length > len(der):
        raise ValueError("truncated DER")
    return tag, (pos, pos + length)


def _der_time(tag: int, raw: bytes) -> datetime:
    text = raw.decode("ascii")
    if tag == 0x17:  # UTCTime YYMMDDHHMMSSZ (RFC 5280: YY < 50 is 20YY)
        year = int(text[:2])
        text = f"{2000 + year if year < 50 else 1900 + year}{text[2:]}"
    elif tag != 0x18:  # GeneralizedTime YYYYMMDDHHMMSSZ
        raise ValueError(f"not a DER time: tag {tag:#x}")
    return datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=timezone.utc)


# ---- the first handshake -----------------------------------------------------------------------


def check_handshake(
    settings: ConnectionSettings,
    context: ssl.SSLContext,
    connect: Callable[[tuple[str, int], float], socket.socket] = socket.create_connection,
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
) -> None:
    """Complete TLS (and one ApiVersions round trip) with some bootstrap server, or raise.

    ``TlsHandshakeError`` as soon as a server's TLS fails for a reason retrying cannot fix;
    ``ClusterUnreachable`` when no server could be reached within ``request_timeout_ms``.
    ``connect`` and ``now`` are injectable for tests.
    """
    deadline = Deadline(settings.request_timeout_ms / 1000)
    # A hung server (it accepts, then says nothing) must not use up the time of the others.
    per_server = max(1.0, settings.request_timeout_ms / 1000 / len(settings.bootstrap_servers))
    backoff = Backoff(first=0.1, cap=1.0)
    last: Optional[BaseException] = None
    while not deadline.expired():
        for server in settings.bootstrap_servers:
            try:
                _handshake(server, context, settings.client_id, connect, min(per_server, deadline.remaining()))
                return
            except (OSError, ValueError) as exc:
                failure = tls_failure(exc, server, settings, now)
                if failure is not None:
                    raise failure from None
                last = exc  # refused, reset, timed out: maybe a restarting broker
                log.info("TLS connection to %s failed (%s); trying again", server, type(exc).__name__)
            if deadline.expired():
                break
        time.sleep(backoff.within(deadline))
    raise ClusterUnreachable(
        f"no Kafka broker answered at {settings.servers} within {settings.request_timeout_ms} ms "
        f"({type(last).__name__ if last else 'timed out'})"
    )


def _handshake(
    server: str,
    context: ssl.SSLContext,
    client_id: str,
    connect: Callable[[tuple[str, int], float], socket.socket],
    seconds: float,
) -> None:
    attempt = Deadline(max(0.05, seconds))
    host, _, port = server.rpartition(":")
    host = host.strip("[]")
    raw = connect((host, int(port)), attempt.remaining())
    try:
        raw.settimeout(max(0.05, attempt.remaining()))
        sock = context.wrap_socket(raw, server_hostname=host.rstrip("."))
    except BaseException:
        raw.close()
        raise
    with sock:
        try:
            sock.settimeout(max(0.05, attempt.remaining()))
            _api_versions(sock, client_id)
        except (OSError, EOFError) as exc:
            raise _AfterHandshake(exc) from exc


class _AfterHandshake(OSError):
    """The client's side of the handshake completed, then the server failed the connection."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _api_versions(sock: ssl.SSLSocket, client_id: str) -> None:
    """ApiVersions v0 (allowed before SASL authentication too); read the answer's header."""
    cid = client_id.encode()[:1000]
    body = struct.pack(">hhih", _API_VERSIONS_KEY, 0, 1, len(cid)) + cid
    sock.sendall(struct.pack(">i", len(body)) + body)
    header = b""
    while len(header) < 8:
        chunk = sock.recv(8 - len(header))
        if not chunk:
            raise EOFError("the server closed the connection")
        header += chunk
    if struct.unpack(">i", header[4:8])[0] != 1:
        raise EOFError("the server answered out of order: not a Kafka listener?")


def tls_failure(
    exc: BaseException,
    server: str,
    settings: ConnectionSettings,
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
) -> Optional[TlsHandshakeError]:
    """The ``TlsHandshakeError`` for a failed connection to ``server``, naming the setting at
    fault; None when retrying might help (the server was unreachable or slow)."""
    cause = exc.cause if isinstance(exc, _AfterHandshake) else exc
    prefix = f"TLS handshake with {server} failed"
    if isinstance(cause, ssl.SSLCertVerificationError):
        return _broker_certificate(cause, prefix, server, settings)
    reason = str(getattr(cause, "reason", "") or "")
    if isinstance(cause, ssl.SSLError) and reason in _CLIENT_CERT_ALERTS:
        return _client_certificate(reason, prefix, settings, now)
    if isinstance(exc, _AfterHandshake):
        return None  # closed without an alert after the handshake: a broker going down, say
    if isinstance(cause, (ssl.SSLEOFError, ssl.SSLZeroReturnError)) or reason in _NOT_TLS:
        return TlsHandshakeError(
            f"{prefix}: the server does not speak TLS there ({_reason_of(cause)}); {_PROTOCOL} is "
            f"{settings.security_protocol}: is {server} a PLAINTEXT or SASL_PLAINTEXT listener?"
        )
    if isinstance(cause, ssl.SSLError):
        return TlsHandshakeError(f"{prefix} ({_reason_of(cause)}); check {_PROTOCOL} and the broker's listener")
    return None


def _reason_of(exc: BaseException) -> str:
    return str(getattr(exc, "reason", None) or type(exc).__name__)


def _broker_certificate(
    exc: ssl.SSLCertVerificationError, prefix: str, server: str, settings: ConnectionSettings
) -> TlsHandshakeError:
    code, what = exc.verify_code, exc.verify_message
    trusted_by = f"{_CAFILE} ({settings.ssl_cafile})" if settings.ssl_cafile else f"the system's CAs ({_CAFILE} is not set)"
    if code in _HOSTNAME_MISMATCH:
        host = server.rpartition(":")[0]
        return TlsHandshakeError(
            f"{prefix}: the broker's certificate is not valid for {host} ({what}); {_HOSTNAME} is true: connect through a "
            f"name the certificate lists, or have it reissued for {host}"
        )
    if code in (_EXPIRED, _NOT_YET_VALID):
        when = "has expired" if code == _EXPIRED else "is not valid yet"
        return TlsHandshakeError(
            f"{prefix}: the broker's certificate {when} ({what}); it must be renewed on the broker "
            f"(its ssl.keystore.location), no client setting fixes this"
        )
    if code in _UNTRUSTED:
        return TlsHandshakeError(f"{prefix}: the broker's certificate is not signed by a CA in {trusted_by} ({what})")
    return TlsHandshakeError(f"{prefix}: the broker's certificate was refused ({what}), verified with {trusted_by}")


def _client_certificate(
    alert: str, prefix: str, settings: ConnectionSettings, now: Callable[[], datetime]
) -> TlsHandshakeError:
    if not settings.ssl_certfile:
        return TlsHandshakeError(
            f"{prefix}: the broker requires a client certificate (mutual TLS, alert {alert}): set {_CERTFILE} and {_KEYFILE}"
        )
    why = "is it signed by a CA the broker trusts (its ssl.truststore.location), and meant for client authentication?"
    try:
        with open(settings.ssl_certfile, encoding="ascii", errors="replace") as f:
            validity = certificate_validity(f.read())
    except OSError:
        validity = None
    if validity is not None:
        not_before, not_after = validity
        at = now()
        if at > not_after:
            why = f"it expired on {not_after:%Y-%m-%d %H:%M:%S} UTC"
        elif at < not_before:
            why = f"it is valid only from {not_before:%Y-%m-%d %H:%M:%S} UTC"
    return TlsHandshakeError(
        f"{prefix}: the broker refused the client certificate in {_CERTFILE} ({settings.ssl_certfile}): {why} (alert {alert})"
    )


def uses_tls(settings: ConnectionSettings) -> bool:
    return settings.security_protocol.upper() in ("SSL", "SASL_SSL")


__all__ = ["SETTING_KEYS", "certificate_validity", "check_handshake", "ssl_context", "tls_failure", "uses_tls"]
