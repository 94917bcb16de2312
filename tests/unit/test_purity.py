"""The pure core imports no adapter library, directly or through anything it imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ADAPTERS = {
    "kazoo",
    "fastapi",
    "uvicorn",
    "apscheduler",
    "prometheus_client",
    "pyspark",
    "httpx",
    "psutil",
    "starlette",
    "requests",
    "threading",
    "socket",
    "subprocess",
}
LIBRARIES = sorted(ADAPTERS - {"threading", "socket", "subprocess"})
ROOT = Path(__file__).resolve().parents[2]


def test_no_adapter_import_statement_in_balancer() -> None:
    offenders = []
    for path in (ROOT / "balancer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in ADAPTERS]
    assert offenders == []


def test_importing_every_balancer_module_loads_no_adapter() -> None:
    code = (
        "import importlib, pkgutil, sys, balancer\n"
        "for m in pkgutil.walk_packages(balancer.__path__, 'balancer.'):\n"
        "    importlib.import_module(m.name)\n"
        f"bad = sorted(n for n in sys.modules if n.split('.')[0] in {LIBRARIES!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""
