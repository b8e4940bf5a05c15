"""What a control manager decides: the records to commit and the answer to give once they are (Kafka's
ControllerResult).

Rules:
- A manager never commits. It reads the controller's image (every record committed or applied so far) and
  returns records; the controller appends them in one commit, applies them, and only then answers.
- No records: nothing is written (a refused request, a retry, a validate-only request, a no-op).
- Log lines that say a change was made are the result's `log`: the controller writes them after the commit, so a
  failed append leaves no line claiming it. Lines about a decision itself (elections, the events) a manager
  writes as it decides.
- A decision that must see its own first records applied before it decides the rest (an ISR change that
  completes a reassignment) is `ControllerSteps`: a generator yielding each commit's records and returning the
  answer.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    records: list[Any]
    response: T
    log: tuple[str, ...] = ()  # INFO lines, written once the records are committed


# Each yielded list is one commit, applied before the generator resumes; its return value is the answer.
ControllerSteps = Generator[list[Any], None, T]
