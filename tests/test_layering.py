"""The layering rules (epoch_broker/__init__.py): one import root, and floors between the layer folders.

- Every import of our code goes through `epoch_broker.<layer>`: no bare `protocol`, `storage`, `broker`,
  `client`, `drill` or `spark` import anywhere in the repository (tests and benchmarks included), and no
  relative imports in the product (they would slip past these checks).
- Floors: protocol imports nothing of ours; storage only protocol; client only protocol; broker never drill
  or spark; spark only client and protocol. drill may use spark: the spark-pipeline drill runs a Spark job
  (drill/pipeline.py) with the kafka-epoch source and sink. A module named in a string (importlib,
  HANDLER_PACKAGES) counts.
- protocol/ and storage/ are sans-IO: no event loop, no sockets.
- Inside broker/: its sub-packages and top-level modules are in one order, `BROKER_ORDER`, low to high; a
  module imports at run time (a function's imports and a module named in a string included) only its own
  unit and lower ones, so no import loop runs between them. Imports under `if TYPE_CHECKING:` are typing
  only and may point anywhere.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("protocol", "storage", "client", "broker", "drill", "spark")
ALLOWED: dict[str, set[str]] = {
    "protocol": {"protocol"},
    "storage": {"storage", "protocol"},
    "client": {"client", "protocol"},
    "broker": {"broker", "storage", "client", "protocol"},
    "drill": {"drill", "broker", "storage", "client", "protocol", "spark"},
    "spark": {"spark", "client", "protocol"},
}
IO_MODULES = {"asyncio", "uvloop", "socket", "selectors"}
MODULE_STRING = re.compile(r"^epoch_broker\.(\w+)(\.\w+)*$")
SKIP_DIRS = {".venv", "node_modules", ".git", "build"}

# broker/'s sub-packages and top-level modules, low to high: each imports at run time only those before it.
# Derived from what the code imports, and laid out as Kafka layers a broker:
# - leaves (Kafka's clients/common and server-common): `services` (the handlers' view of a process, names
#   imported for typing only), the event log, the generated reference pages' Markdown, the fault catalogue, the
#   file budget, the principal syntax, the RE2-compatible reading of clients' regular expressions, the client
#   telemetry subscriptions and pushes (KIP-714; Kafka's server module's ClientMetricsManager).
# - config (KafkaConfig): read by everything above; it parses `super.users` with principal.py, not security/.
# - security: the authorizer, SASL, TLS and each listener's security (Kafka builds its authorizer and channel
#   builders from the config, below the SocketServer); a listener's server is handed in, never imported.
# - metadata (Kafka's metadata module: records and the image, which holds ACLs and SCRAM credentials) and
#   the stored log's names; then the coordinators on it: groups, and transactions (a transactional offset
#   commit goes to the group's `__consumer_offsets` partition, placed by the group coordinator).
# - metrics and status: their collectors read groups' states and metadata records, so they sit above those
#   (Kafka's metrics registry is low because components push into it; here the collectors pull).
# - log_dirs: the start-up checks of the data dirs, which both a broker and a controller process run.
# - network (SocketServer, RequestChannel and the dispatcher): both process roles serve through it.
# - controller (QuorumController, its stores and ControllerServer), then the broker's own machinery above it:
#   replica (ReplicaManager, partitions, fetchers; it reaches the controller by its channel), then handlers
#   (KafkaApis), then app (BrokerServer: wires everything).
BROKER_ORDER = (
    "eager", "services", "events", "reference", "faults", "file_budget", "principal", "regex", "client_metrics",
    "config",
    "security",
    "metadata", "groups", "transactions",
    "metrics", "status",
    "log_dirs",
    "network",
    "controller",
    "replica",
    "handlers",
    "app",
)
# Imports by name that climb, each with why; nothing else may. The dispatcher imports every handler module at
# start (network/dispatch.py `load_handlers`) so that each registers itself with `@handles`: the handlers import
# the dispatcher, and the dispatcher knows only their packages' names. (The one runtime loop left inside broker/:
# breaking it means the processes in app.py and controller/server.py handing the dispatcher its registry.)
CLIMBS_BY_NAME = {
    ("broker/network/dispatch.py", "epoch_broker.broker.handlers"),
    ("broker/network/dispatch.py", "epoch_broker.broker.controller.handlers"),
}


def python_files(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.rglob("*.py")) if not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)]


def imports_of(path: Path) -> list[tuple[str, int]]:
    """(module, level) of every import in `path`, and of every string naming an epoch_broker module."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value):
            found.append((node.value, 0))
    return found


def our_layer(module: str) -> str | None:
    """The layer an absolute import of ours reaches (None for the import root itself and for others' code)."""
    parts = module.split(".")
    if parts[0] == "epoch_broker" and len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return None


def test_no_bare_layer_import_anywhere_in_the_repository() -> None:
    offenders = [(str(path.relative_to(ROOT)), module) for path in python_files(ROOT)
                 for module, level in imports_of(path) if level == 0 and module.split(".")[0] in LAYERS]
    assert offenders == []


@pytest.mark.parametrize("layer", [*LAYERS, "epoch_broker"])
def test_product_code_uses_no_relative_imports(layer: str) -> None:
    offenders = [(str(path.relative_to(ROOT)), module) for path in python_files(ROOT / layer)
                 for module, level in imports_of(path) if level > 0] if (ROOT / layer).is_dir() else []
    assert offenders == []


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_only_the_layers_below_it(layer: str) -> None:
    folder = ROOT / layer
    if layer != "spark":  # spark/ lands with the PySpark data source; every other layer exists
        assert folder.is_dir()
    offenders = []
    for path in python_files(folder) if folder.is_dir() else []:
        for module, _ in imports_of(path):
            reached = our_layer(module)
            if module == "epoch_broker" or module.startswith("epoch_broker.__") or (
                    reached is not None and reached not in ALLOWED[layer]):
                offenders.append((str(path.relative_to(ROOT)), module))
    assert offenders == []


def runtime_imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module, line, named_in_a_string) of every import of `path` that runs: at module level or in a function,
    but not under `if TYPE_CHECKING:` (its `else:` runs); `from package import name` gives `package.name`."""
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno, False) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.extend((f"{node.module}.{alias.name}", node.lineno, False) for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value):
            found.append((node.value, node.lineno, True))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def broker_unit(module: str) -> str | None:
    """The unit of BROKER_ORDER a module of broker/ is in (`epoch_broker.broker.controller.store.file` ->
    `controller`); None for the broker package itself and for anything outside broker/."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["epoch_broker", "broker"] and len(parts) > 2 else None


def module_of(path: Path) -> str:
    return ".".join(("epoch_broker", *path.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")


def test_broker_order_names_every_unit_of_broker_once() -> None:
    units = {unit for path in python_files(ROOT / "broker") if (unit := broker_unit(module_of(path)))}
    assert len(set(BROKER_ORDER)) == len(BROKER_ORDER)
    assert sorted(units - set(BROKER_ORDER)) == [], "give each its place in BROKER_ORDER"
    assert sorted(set(BROKER_ORDER) - units) == [], "BROKER_ORDER names what broker/ no longer has"


def test_broker_units_import_only_lower_ones_at_run_time() -> None:
    rank = {unit: position for position, unit in enumerate(BROKER_ORDER)}
    offenders, climbs_by_name = [], set()
    for path in python_files(ROOT / "broker"):
        relative, own = path.relative_to(ROOT), broker_unit(module_of(path))
        for module, line, by_name in runtime_imports(path):
            target = broker_unit(module)
            if own not in rank or target not in rank:
                continue  # the package root, others' code, or a unit the test above finds unplaced
            if rank[target] <= rank[own]:
                continue
            if by_name and (str(relative), module) in CLIMBS_BY_NAME:
                climbs_by_name.add((str(relative), module))
            else:
                offenders.append(f"{relative}:{line} imports {module}: {target} is above {own} in BROKER_ORDER")
    assert offenders == []
    assert climbs_by_name == CLIMBS_BY_NAME, "an allowed climb that no longer happens leaves CLIMBS_BY_NAME"


@pytest.mark.parametrize("layer", ["protocol", "storage"])
def test_sans_io_layers_never_import_the_event_loop_or_sockets(layer: str) -> None:
    offenders = [(str(path.relative_to(ROOT)), module) for path in python_files(ROOT / layer)
                 for module, _ in imports_of(path) if module.split(".")[0] in IO_MODULES]
    assert offenders == []


def test_the_checks_see_what_they_forbid(tmp_path: Path) -> None:
    """The scanner itself: a bare import, a relative import and a module named in a string are all seen."""
    sample = tmp_path / "sample.py"
    sample.write_text("import broker.app\nfrom . import x\nname = 'epoch_broker.drill.admin'\n")
    assert imports_of(sample) == [("broker.app", 0), ("", 1), ("epoch_broker.drill.admin", 0)]
    assert our_layer("epoch_broker.drill.admin") == "drill"
    assert our_layer("epoch_broker") is None


def test_the_broker_order_check_sees_what_runs(tmp_path: Path) -> None:
    """A function's import and a module named in a string run; an import under TYPE_CHECKING does not."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import typing\nfrom epoch_broker.broker import config\nif typing.TYPE_CHECKING:\n"
        "    from epoch_broker.broker.app import Broker\nelse:\n    import epoch_broker.broker.faults\n"
        "def f():\n    from epoch_broker.broker.network.server import KafkaServer\n"
        "NAME = 'epoch_broker.broker.handlers'\n")
    assert runtime_imports(sample) == [
        ("typing", 1, False), ("epoch_broker.broker.config", 2, False), ("epoch_broker.broker.faults", 6, False),
        ("epoch_broker.broker.network.server.KafkaServer", 8, False), ("epoch_broker.broker.handlers", 9, True)]
    assert [broker_unit(m) for m, _, _ in runtime_imports(sample)] == [
        None, "config", "faults", "network", "handlers"]
    assert broker_unit("epoch_broker.broker") is None
