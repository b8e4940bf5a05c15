"""`Partition` is the one writer of partition state (broker/replica/partition.py): no other module of the broker
assigns a Partition's fields or its log's, or calls the log's writing methods."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWNER = ROOT / "broker" / "replica" / "partition.py"
PARTITION_FIELDS = {"leader_id", "leader_epoch", "partition_epoch", "replicas", "isr", "pending_isr", "configs",
                    "followers", "leader_log_end_at_election", "log"}
LOG_WRITERS = {"append_as_leader", "append_as_follower", "truncate_to", "truncate_fully_and_start_at",
               "delete_records_before", "assign", "high_watermark"}


def _names(node: ast.expr) -> str:
    """`partition.log` for partition.log, `self.x` for self.x: the dotted text of a target's base."""
    return ast.unparse(node)


def offenders_in(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
        for target in targets:
            for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                if not isinstance(element, ast.Attribute):
                    continue
                base = _names(element.value)
                writes_partition = "partition" in base.split(".")[-1] and element.attr in PARTITION_FIELDS
                writes_log = base.endswith(".log") or base.endswith("partition_log")
                if (writes_partition or writes_log) and not base.startswith("self"):
                    found.append(f"{path.relative_to(root)}:{node.lineno} assigns {ast.unparse(element)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOG_WRITERS:
            base = _names(node.func.value)
            if "log" in base.split(".")[-1] and "epoch_cache" not in base:
                found.append(f"{path.relative_to(root)}:{node.lineno} calls {ast.unparse(node.func)}")
    return found


def test_only_partition_assigns_partition_state_or_writes_its_log() -> None:
    offenders = [o for path in sorted((ROOT / "broker").rglob("*.py")) if path != OWNER for o in offenders_in(path)]
    assert offenders == []


def test_the_check_sees_the_writes_it_forbids(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("partition.pending_isr = None\npartition.log.high_watermark = 3\n"
                      "partition_log.truncate_to(4)\nself.isr = ()\nstate.isr = ()\n")
    assert [o.split(" ", 1)[1] for o in offenders_in(sample, tmp_path)] == [
        "assigns partition.pending_isr", "assigns partition.log.high_watermark", "calls partition_log.truncate_to"]
