"""The snapshot diagnostics' shared start (``snapshot_memory.py``, ``snapshot_parts.py``): the
cycle bench's setup on one local KRaft node (``cycle_bench.build_topics`` and ``commit_all``:
topics of 50 partitions, group *i* committing on every partition of topic *i* mod #topics), a
purge config for it, and the diagnostic's own measuring side run in a fresh Python process."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]


def measured_on_setup(script: str, partitions: int, groups: int, extra: list[str]) -> dict[str, Any] | None:
    """Builds the setup, runs ``script --measure CONFIG *extra`` in a fresh process and gives the
    JSON object on its last line (None: the process failed; the tail of its stderr is printed)."""
    import yaml
    from cycle_bench import BROKER_CONFIG, assign, build_topics, commit_all

    from spark_purge.testing import workload
    from spark_purge.testing.cluster import LocalKafka

    run = uuid.uuid4().hex[:4]
    with tempfile.TemporaryDirectory(prefix=f"{Path(script).stem}-") as tmp, LocalKafka(
        nodes=1, heap="3g", broker_config=BROKER_CONFIG, start_timeout_s=300
    ) as cluster:
        assignments = assign(build_topics(cluster.bootstrap_servers, partitions, 50, run, 1), groups, run)
        took = commit_all(cluster.bootstrap_servers, assignments, 1)
        print(f"setup: {groups} groups, {sum(map(len, assignments.values()))} commits: {took:.1f}s", flush=True)
        config = workload.purge_config_dict(Path(tmp), cluster.bootstrap_servers, f"cyc-{run}-.*", None, request_timeout="120s")
        config_file = Path(tmp) / "purge.yaml"
        config_file.write_text(yaml.safe_dump(config))
        done = subprocess.run([sys.executable, script, "--measure", str(config_file), *extra], capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return None
        found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return found
