"""Regular expressions from clients, read as Kafka reads them: RE2/J (KIP-848's SubscribedTopicRegex, KIP-1152's
TransactionalIdPattern). A leaf: imports nothing of the broker's.

Python's `re` is used, with the constructs RE2 does not have (look-around, back-references, possessive and atomic
groups, conditionals) refused as INVALID_REGULAR_EXPRESSION, so a pattern accepted here means the same as in Kafka.
"""

from __future__ import annotations

import functools
import re

from epoch_broker.protocol.errors import ErrorCode, KafkaError

# Constructs of Python's `re` that RE2/J refuses: look-around, back-references (numbered and named), atomic and
# possessive groups, conditionals. A `\` escape is skipped as a unit so `\(?=` is a literal, not a look-ahead.
_NOT_RE2 = re.compile(r"\\[1-9]|\(\?(?:=|!|<=|<!|P=|>|\()|[*+?}]\+")


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str, what: str = "SubscribedTopicRegex") -> re.Pattern[str]:
    """The pattern as RE2/J reads it, or KafkaError(INVALID_REGULAR_EXPRESSION) naming `what` it is."""
    unescaped = re.sub(r"\\[^1-9]", "", pattern)
    if _NOT_RE2.search(unescaped):
        raise KafkaError(f"{what} {pattern!r} uses a construct RE2 does not support",
                         ErrorCode.INVALID_REGULAR_EXPRESSION)
    try:
        return re.compile(pattern)
    except re.error as e:
        raise KafkaError(f"{what} {pattern!r} is invalid: {e}", ErrorCode.INVALID_REGULAR_EXPRESSION) from None
