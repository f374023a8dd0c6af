"""spark-purge: consumer-aware Kafka purging on Spark, with a Delta audit."""
from __future__ import annotations

from setuptools import find_packages, setup

setup(
    name="spark-purge",
    version="0.1.0",
    description=(
        "Delete Kafka records once every consumer that needs them has consumed them, "
        "with a Delta audit of every decision."
    ),
    python_requires=">=3.10",
    packages=find_packages(include=["spark_purge", "spark_purge.*"]),
    package_data={"spark_purge": ["py.typed", "log4j2.properties", "kafka/message_schemas/*.json", "testing/java/*.java"]},
    install_requires=[
        # 4.2.0 is the newest PySpark that delta-spark 4.4.1 accepts.
        "pyspark==4.2.0",
        "delta-spark==4.4.1",
        "kafka-python>=3.0.12,<3.1",
        # Python data sources need pyarrow; PySpark 4.2 does not fully support pandas 3.
        "pyarrow>=15,<27",
        "pandas>=2.2,<3",
        "PyYAML>=6.0,<7",
    ],
    extras_require={
        "test": [
            "pytest>=8,<10",
            "chispa>=0.11,<0.13",
            "hypothesis>=6.100,<7",
            # ./dev.sh test runs the suite on two workers: the fault suite's 3-node cluster on one,
            # the single-node integration tests on the other (tests/conftest.py groups them)
            "pytest-xdist>=3.6,<4",
            # lint and type gates run by ./dev.sh test (configured in pyproject.toml)
            "ruff>=0.8,<1",
            "mypy>=1.13,<2",
            "types-PyYAML>=6,<7",
            # audit --plot's test, and the Databricks job definition's check (JobSettings types)
            "matplotlib>=3.8,<4",
            "databricks-sdk>=0.40,<1",
            # the test cluster's TLS certificates, made at test time (spark_purge/testing/tls.py)
            "cryptography>=42,<51",
        ],
        # spark-purge audit --plot FILE.png|.svg|.html
        "plot": ["matplotlib>=3.8,<4"],
    },
    entry_points={"console_scripts": ["spark-purge=spark_purge.cli:main"]},
)
