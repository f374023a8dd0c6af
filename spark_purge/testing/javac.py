"""Java sources the test helpers run (``testing/java/*.java``), compiled with ``javac`` on first
use into a temp folder keyed by the source and the jar list it compiles against."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

JAVA_DIR = Path(__file__).resolve().parent / "java"
_compile_lock = threading.Lock()


def java_tool(name: str) -> str:
    """``java`` or ``javac`` from PATH, else from JAVA_HOME; RuntimeError naming it when absent."""
    found = shutil.which(name)
    if found is None and "JAVA_HOME" in os.environ:
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / name
        found = str(candidate) if candidate.exists() else None
    if found is None:
        raise RuntimeError(f"{name} not found on PATH (or in JAVA_HOME): the test helpers need a JDK 17+")
    return found


def compiled_classes(source: Path, jars: Path) -> Path:
    """The folder holding ``source`` compiled against ``jars/*`` (in its package's subfolders;
    compiled once per source and jar list)."""
    digest = hashlib.sha256(source.read_bytes())
    digest.update("\n".join(sorted(p.name for p in jars.glob("*.jar"))).encode())
    out = Path(tempfile.gettempdir()) / f"spark-purge-java-{digest.hexdigest()[:16]}"
    done = out / f".{source.stem}.ok"
    with _compile_lock:
        if not done.exists():
            staging = Path(tempfile.mkdtemp(prefix="spark-purge-javac-"))
            try:
                result = subprocess.run(
                    [java_tool("javac"), "-d", str(staging), "-cp", str(jars / "*"), str(source)],
                    capture_output=True,
                    text=True,
                    timeout=180,
                )
                if result.returncode != 0:
                    raise RuntimeError(f"javac {source.name} failed:\n{result.stderr}")
                for cls in staging.rglob("*.class"):
                    target = out / cls.relative_to(staging)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(cls, target)
                done.touch()
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return out
