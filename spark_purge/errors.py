"""The spark-purge exception tree. Every error the package raises derives from one root::

    SparkPurgeError
    ├── ConfigError            bad configuration or options; names the key at fault
    │   ├── ConfigProblems     several at once (a config file with more than one problem)
    │   └── TieringRefused     a tiering request that does not fit the topic (names it)
    ├── KafkaError             the cluster could not be read or written
    │   ├── ClusterUnreachable bootstrap servers did not answer within the timeout
    │   ├── GroupsUnsettled    the consumer-group list could not be proven complete in time
    │   ├── LeaderRequestError a request to one partition leader failed as a whole (retriable)
    │   ├── AuthorizationError an operation on a resource was denied
    │   ├── TlsHandshakeError  TLS with a broker failed (certificate untrusted, expired, for another
    │   │                      host, or ours refused); names the setting at fault
    │   └── TieringUnconfirmed Kafka did not confirm a tiering step in time (resumable)
    ├── AuditError             the Delta audit table could not be read or written
    └── FencedError            another purge job holds a newer lease on this cluster

Branch on the class (or on ``retriable``), never on message text. (The test harness has its
own errors, in ``spark_purge.testing.errors``.)
"""
from __future__ import annotations

from collections.abc import Sequence


class SparkPurgeError(Exception):
    """Raised for any failure spark-purge itself reports."""

    retriable: bool = False


class ConfigError(SparkPurgeError, ValueError):
    """Raised when configuration, options or arguments are invalid; the message names the key."""

    @property
    def problems(self) -> tuple[str, ...]:
        """Each problem on its own, key path first: this one (``ConfigProblems`` has several)."""
        return (str(self),)


class ConfigProblems(ConfigError):
    """Raised when a configuration has several problems; ``problems`` lists every one."""

    def __init__(self, problems: Sequence[str]) -> None:
        self._problems = tuple(problems)
        super().__init__(f"{len(self._problems)} problems:\n" + "\n".join(f"  {p}" for p in self._problems))

    @property
    def problems(self) -> tuple[str, ...]:
        return self._problems


class TieringRefused(ConfigError):
    """Raised when a tiered-storage disablement does not fit the topic (unknown topic, no tiered
    storage, another policy already under way); nothing was recorded or changed."""


class KafkaError(SparkPurgeError):
    """Raised when the Kafka cluster could not be read or written."""


class TieringUnconfirmed(KafkaError):
    """Raised when Kafka did not confirm a tiered-storage step before the deadline; the state
    stays DISABLING with its policy, and running the command again resumes it."""

    retriable = True


class ClusterUnreachable(KafkaError):
    """Raised when no bootstrap server answered within the configured timeout."""

    retriable = True


class GroupsUnsettled(KafkaError):
    """Raised when group coordinators kept moving (or a broker kept failing) until the deadline,
    so the consumer-group list may be incomplete; retriable."""

    retriable = True


class LeaderRequestError(KafkaError):
    """Raised when a request to one partition leader failed as a whole (not per partition):
    the leader was unreachable, or the request timed out (``timed_out``); retriable."""

    retriable = True

    def __init__(self, message: str, timed_out: bool) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class AuthorizationError(KafkaError):
    """Raised when the broker denied an operation on a resource (names both)."""


class TlsHandshakeError(KafkaError):
    """Raised when the TLS handshake with a broker failed for a reason retrying cannot fix (its
    certificate is not trusted, has expired or names another host; it refused ours); the message
    names the setting at fault."""


class AuditError(SparkPurgeError):
    """Raised when the Delta audit table could not be read or written."""


class FencedError(SparkPurgeError):
    """Raised when a newer purge job holds the lease: this one must not act."""


def from_spark_exception(exc: BaseException) -> BaseException:
    """The spark-purge error inside an exception Spark wrapped (a data source or foreachBatch
    failure reaches the driver as a Py4J/StreamingQueryException whose text holds ours).
    Returns ``exc`` itself when none is found."""
    if isinstance(exc, SparkPurgeError):
        return exc
    text = str(exc)
    # Most specific first: the marker of a subclass also names its module path.
    for cls in (ClusterUnreachable, GroupsUnsettled, AuthorizationError, TlsHandshakeError, KafkaError, ConfigError, AuditError, FencedError):
        marker = f"{cls.__module__}.{cls.__name__}: "
        if marker in text:
            return cls(text.split(marker, 1)[1].split("\n", 1)[0].strip())
    return exc


class CheckpointError(SparkPurgeError):
    """Raised when an external consumer's checkpoint (a Spark streaming query's) is missing,
    unreadable or malformed: the partitions it covers are blocked, never guessed."""
