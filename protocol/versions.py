"""Version ranges as Kafka's message JSON writes them: "none", "N", "N-M" or "N+"."""

from __future__ import annotations

from dataclasses import dataclass

# Open-ended ranges ("3+") stop here; no Kafka API is anywhere near this version.
_OPEN_END = 0x7FFF


@dataclass(frozen=True, slots=True)
class VersionRange:
    low: int
    high: int  # inclusive; _OPEN_END for "N+"; low > high means "none"

    @classmethod
    def parse(cls, text: str | VersionRange | None) -> VersionRange:
        if isinstance(text, VersionRange):
            return text
        if text is None or text == "none":
            return NONE
        if text.endswith("+"):
            return cls(int(text[:-1]), _OPEN_END)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    @property
    def is_none(self) -> bool:
        return self.low > self.high

    def __str__(self) -> str:
        if self.is_none:
            return "none"
        if self.high == _OPEN_END:
            return f"{self.low}+"
        return f"{self.low}" if self.low == self.high else f"{self.low}-{self.high}"


NONE = VersionRange(1, 0)
