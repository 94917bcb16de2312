"""The import direction of ``service/``: each package imports only from the layers below it (see the
docstring of :mod:`service`). Every import counts, including ones inside functions and under
``TYPE_CHECKING``: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "service"
FOUNDATION = {"errors", "settings", "json_bounds"}
ALLOWED: dict[str, set[str]] = {
    "commands": {"demo", "api", "leader", "broker", "longterm", "pulsar", "zookeeper"},
    "demo": {"api", "leader", "broker", "longterm", "zookeeper"},
    "api": {"leader"},
    "leader": {"pulsar", "zookeeper"},
    "pulsar": {"zookeeper"},
    "broker": {"zookeeper"},
    "longterm": {"zookeeper"},
    "zookeeper": set(),
}
# Inside service/zookeeper, by concern (see its docstring): "paths" is the module paths.py, the others
# are subpackages. An import of the package itself (``from service.zookeeper import paths``) names
# the module imported.
ZK = ROOT / "zookeeper"
ZK_FOUNDATION = {"paths"}
ZK_ALLOWED: dict[str, set[str]] = {
    "session": set(),
    "metadata": {"session"},
    "server": set(),
    "forensics": {"metadata", "session", "server"},
}


def _owner(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("").parts
    return rel[0]


def _service_imports(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "service":
                found += [(node.lineno, a.name) for a in node.names]
            elif node.module.startswith("service."):
                found.append((node.lineno, node.module.split(".")[1]))
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("service.")
            ]
    return found


def _violations() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        owner = _owner(path)
        if owner in {"__init__", "__main__"}:
            continue
        allowed = set() if owner in FOUNDATION else ALLOWED[owner] | FOUNDATION
        for line, target in _service_imports(path):
            if target != owner and target not in allowed:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {owner} imports service.{target}")
    return bad


def _zk_part(path: Path) -> str:
    return path.relative_to(ZK).with_suffix("").parts[0]


def _zk_imports(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "service.zookeeper":
                names = [f"service.zookeeper.{a.name}" for a in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found += [(node.lineno, n.split(".")[2]) for n in names if n.startswith("service.zookeeper.")]
    return found


def _zk_violations() -> list[str]:
    bad = []
    for path in sorted(ZK.rglob("*.py")):
        part = _zk_part(path)
        if part == "__init__":
            continue
        allowed = set() if part in ZK_FOUNDATION else ZK_ALLOWED[part] | ZK_FOUNDATION
        for line, target in _zk_imports(path):
            if target != part and target not in allowed:
                bad.append(
                    f"{path.relative_to(ROOT.parent)}:{line}: zookeeper.{part} imports zookeeper.{target}"
                )
    return bad


def test_zookeeper_is_split_by_concern() -> None:
    parts = {_zk_part(p) for p in ZK.rglob("*.py")} - {"__init__"}
    assert parts == set(ZK_ALLOWED) | ZK_FOUNDATION, parts ^ (set(ZK_ALLOWED) | ZK_FOUNDATION)
    assert _zk_violations() == []


def test_the_zookeeper_check_catches_a_cross_concern_import() -> None:
    # The session plumbing must not reach up into Pulsar's records.
    probe = ZK / "session" / "_layer_probe.py"
    probe.write_text("from service.zookeeper.metadata import store\n")
    try:
        assert any("_layer_probe" in v for v in _zk_violations())
    finally:
        probe.unlink()


def test_every_module_belongs_to_a_known_layer() -> None:
    owners = {_owner(p) for p in ROOT.rglob("*.py")} - {"__init__", "__main__"}
    assert owners <= set(ALLOWED) | FOUNDATION, owners - set(ALLOWED) - FOUNDATION


def test_imports_only_go_down() -> None:
    assert _violations() == []


def test_layers_have_no_cycles() -> None:
    # The allowed map itself must be a DAG, or "down" would mean nothing.
    state: dict[str, int] = {}

    def visit(node: str) -> None:
        assert state.get(node) != 1, f"cycle through {node}"
        if state.get(node) == 2:
            return
        state[node] = 1
        for nxt in ALLOWED.get(node, set()):
            visit(nxt)
        state[node] = 2

    for layer in ALLOWED:
        visit(layer)


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    # A zookeeper module importing the leader must be reported.
    probe = ROOT / "zookeeper" / "_layer_probe.py"
    probe.write_text("from service.leader import jobs\n")
    try:
        assert any("_layer_probe" in v for v in _violations())
    finally:
        probe.unlink()
