"""The test harness: never imported by product code (like delta's ``python/delta/testing``).

    cluster.py     LocalKafka: real KRaft brokers on 127.0.0.1 (tests, demo, benchmarks)
    workload.py    the workload helpers every harness shares: topics, produce, commits,
                   log start offsets, audit rows, and the retry they all go through
    invariants.py  the randomized, seeded no-data-loss checker (``python -m spark_purge.testing.invariants``)
    demo.py        ``./dev.sh demo`` (``python -m spark_purge.testing.demo``)
    errors.py      the harness's own error tree (outside the product's ``SparkPurgeError``)

It ships in the wheel so the installed package can be exercised against a real broker, but
nothing under ``spark_purge/`` outside this folder imports it.
"""
