"""Kafka wire-protocol message schemas (JSON) that kafka-python 3.0.x does not ship.

Loaded by :mod:`spark_purge.kafka.messages` through kafka-python's own JSON message layer.
"""
