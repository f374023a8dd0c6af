"""The SCRAM users of the one secured cluster a test run shares (``secure_cluster`` in conftest).

Distinctive passwords, so a leak cannot hide behind a common substring. ``admin`` is the super
user; ``purger`` the purge principal (its ACLs are set per test); ``nocluster`` lacks Cluster
Describe.
"""
from __future__ import annotations

import uuid

PURGER_PASSWORD = f"purger-pw-{uuid.uuid4().hex}"
ADMIN_PASSWORD = f"admin-pw-{uuid.uuid4().hex}"
NOCLUSTER_PASSWORD = f"nocluster-pw-{uuid.uuid4().hex}"
SCRAM_USERS = {"admin": ADMIN_PASSWORD, "purger": PURGER_PASSWORD, "nocluster": NOCLUSTER_PASSWORD}
