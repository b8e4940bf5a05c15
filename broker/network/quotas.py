"""Client quotas enforced as Kafka's ClientQuotaManager, ClientRequestQuotaManager and QuotaFactory do (KIP-13,
KIP-124, KIP-219), from the quotas in this broker's metadata (AlterClientQuotas: broker/metadata/client_quotas.py).

Rules:
- Three quotas, each on its own rate: `producer_byte_rate` (bytes/s of Produce request frames), `consumer_byte_rate`
  (bytes/s of consumer Fetch responses, as encoded) and `request_percentage` (the percentage of one thread's time
  spent handling the client's requests: handler time less its waits, as the metrics' local time).
- A client is (user principal name, client id). Its quota of a kind is the first of Kafka's precedence that has a
  value for that key: user and client-id, user and default client-id, user, default user and client-id, default
  user and default client-id, default user, client-id, default client-id. No value anywhere: not limited, and
  nothing recorded. Clients under one entity share its rate (all client ids of a user quota'd at the user level).
- A rate is Kafka's `Rate` over `WINDOWS` (quota.window.num, 11) samples of `WINDOW_S` (quota.window.size.seconds,
  1): the sum of the samples not older than WINDOWS windows over the time since the oldest one, counted as at least
  WINDOWS - 1 whole windows (so a young rate is not a burst divided by a few milliseconds; it also lets a new client
  send about WINDOWS - 1 windows' worth of its quota before it is throttled, as Kafka's does).
- A request is recorded after its handler, then checked: over the quota, the throttle time is how long the client
  must stay idle for the rate to come back to the quota ((rate - quota) / quota x the rate's window). The response
  carries it in `throttle_time_ms` (the larger of the kinds that apply), and the connection is not read for that
  long once the response is written (KIP-219: answer first, then throttle; broker/network/server.py). A throttled
  consumer Fetch is answered empty (its bytes un-recorded), as Kafka's is: the consumer fetches them again later.
- Not limited (Kafka's exempt requests): ApiVersions and the SASL handshake, what only brokers send (the APIs
  registered `cluster_action`), a replica's Fetch, and everything in a controller process. Produce with acks=0 is
  held to its byte rate (no response: the connection is muted only), not its request time.
- A consumer Fetch under a byte-rate quota asks for at most WINDOWS - 1 windows of its quota (`max_bytes` lowered
  before the handler, Kafka's maxValueInQuotaWindow), so that one fetch can always fit the quota once its client has
  waited. (A first batch larger than that is still returned whole, KIP-74.)
- Skipped: holding back the response itself for a client of a version from before KIP-219
  (every client is answered first, then muted), the throttle-time and byte-rate metrics per client,
  `controller_mutation_rate` (stored, not enforced) and ip connection-creation quotas.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from epoch_broker.broker.metadata.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
)
from epoch_broker.protocol.connection import Request, ServerConnection
from epoch_broker.protocol.messages import fetch, produce

if TYPE_CHECKING:
    from epoch_broker.broker.network.dispatch import RequestContext

WINDOWS = 11  # Kafka's quota.window.num
WINDOW_S = 1.0  # Kafka's quota.window.size.seconds

Quotas = dict[QuotaEntity, dict[str, float]]


class Rate:
    """Kafka's SampledStat `Rate` (a windowed sum over elapsed time), in seconds: up to `windows` + 1 samples (the
    extra one overlapping the window's start), each [start, last event, value], in the order they were made."""

    __slots__ = ("samples", "window_s", "windows")

    def __init__(self, windows: int = WINDOWS, window_s: float = WINDOW_S) -> None:
        self.windows = windows
        self.window_s = window_s
        self.samples: list[list[float]] = []

    def record(self, value: float, now: float) -> None:
        if not self.samples or now - self.samples[-1][0] >= self.window_s:  # the current sample is complete
            self.samples.append([now, now, 0.0])
            if len(self.samples) > self.windows + 1:
                del self.samples[0]
        sample = self.samples[-1]
        sample[1] = now
        sample[2] += value

    def measure(self, now: float) -> tuple[float, float]:
        """(rate per second, the window it is over in seconds) at `now`."""
        for sample in self.samples:
            if now - sample[1] >= self.windows * self.window_s:  # no event within the windows: starts again now
                sample[:] = [now, now, 0.0]
        elapsed = now - min((sample[0] for sample in self.samples), default=now)
        whole = int(elapsed // self.window_s)
        if whole < self.windows - 1:  # too young: counted as windows - 1 whole windows and this one's part
            elapsed += (self.windows - 1 - whole) * self.window_s
        return sum(sample[2] for sample in self.samples) / elapsed, elapsed

    def throttle_s(self, bound: float, now: float) -> float:
        """How long nothing more may be recorded for the rate to come back to `bound` (0 if it is within)."""
        rate, window = self.measure(now)
        return (rate - bound) / bound * window if rate > bound else 0.0


def quota_of(quotas: Quotas, key: str, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
    """The `key` quota of (user, client id) in Kafka's precedence and the (user, client id) whose rate it limits
    ("" for the part the matched entity does not name), or None when none applies."""
    for entity, tags in (
            (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
            (((CLIENT_ID, None), (USER, user)), (user, client_id)),
            (((USER, user),), (user, "")),
            (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
            (((CLIENT_ID, None), (USER, None)), (user, client_id)),
            (((USER, None),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, None),), ("", client_id))):
        values = quotas.get(entity)
        if values is not None and key in values:
            return values[key], tags
    return None


class ClientQuotaManager:
    """The rates of one quota key, per client (Kafka's ClientQuotaManager for one ClientQuotaType)."""

    def __init__(self, key: str, clock: Callable[[], float]) -> None:
        self.key = key
        self.clock = clock
        self.rates: dict[tuple[str, str], Rate] = {}

    def record(self, quotas: Quotas, user: str, client_id: str, value: float) -> float:
        """Record `value` for the client; the throttle time (s) its quota asks for, 0 if none."""
        found = quota_of(quotas, self.key, user, client_id)
        if found is None:
            return 0.0
        bound, tags = found
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = Rate()
        now = self.clock()
        rate.record(value, now)
        return rate.throttle_s(bound, now)

    def unrecord(self, quotas: Quotas, user: str, client_id: str, value: float) -> None:
        """Take back a recorded `value` (a throttled Fetch answered empty)."""
        found = quota_of(quotas, self.key, user, client_id)
        if found is not None and (rate := self.rates.get(found[1])) is not None:
            rate.record(-value, self.clock())


def user_of(principal: str) -> str:
    """The user entity name of a principal ("User:alice" -> "alice"), Kafka's sanitized user."""
    return principal.partition(":")[2]


def _replica_fetch(request: Any) -> bool:
    state = getattr(request, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(request, "replica_id", -1)
    return replica_id >= 0


def _size(parts: list) -> int:
    return sum(len(part) for part in parts)


class ClientQuotas:
    """Kafka's QuotaFactory.QuotaManagers for one broker: the three managers, and the connections to mute."""

    def __init__(self, quotas: Callable[[], Quotas], clock: Callable[[], float]) -> None:
        self.quotas = quotas
        self.clock = clock
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, clock)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, clock)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, clock)
        self._muted: weakref.WeakKeyDictionary[ServerConnection, float] = weakref.WeakKeyDictionary()

    def throttle(self, context: RequestContext, request: Request, response: Any, frame_size: int,
                 parts: list | None) -> list | None:
        """Record one answered request (not an exempt one) against its client's quotas; returns the response parts
        to send: encoded again with `throttle_time_ms` (a throttled Fetch emptied) when the client went over."""
        quotas = self.quotas()
        if not quotas:
            return parts
        user, client, body = user_of(context.principal), context.client_id or "", request.body
        consumer_fetch = context.api_key == fetch.API.key and not _replica_fetch(body)
        throttle_s = 0.0
        if context.api_key == produce.API.key:
            throttle_s = self.produce.record(quotas, user, client, frame_size)
            if response is None:  # acks=0: held to its byte rate by muting only
                self._mute(context, throttle_s)
                return parts
        elif consumer_fetch and parts is not None:
            throttle_s = self.fetch.record(quotas, user, client, _size(parts))
        handler_s = self.clock() - context.received_at - context.queue_s - context.remote_s
        throttle_s = max(throttle_s, self.request.record(quotas, user, client, max(handler_s, 0.0) * 100))
        if throttle_s <= 0.0 or response is None:
            return parts
        if consumer_fetch:
            self.fetch.unrecord(quotas, user, client, _size(parts or []))
            response.responses = []  # as Kafka's: a throttled fetch is answered empty, its records fetched later
        if hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = max(response.throttle_time_ms or 0, int(throttle_s * 1000))
        self._mute(context, throttle_s)
        return ServerConnection.encode_response(request, response)

    def bound_fetch(self, context: RequestContext, body: Any) -> None:
        """Lower a consumer Fetch's `max_bytes` to what its byte-rate quota allows in a window (before the handler)."""
        quotas = self.quotas()
        if not quotas or context.api_key != fetch.API.key or _replica_fetch(body):
            return
        found = quota_of(quotas, CONSUMER_BYTE_RATE, user_of(context.principal), context.client_id or "")
        if found is not None and body.max_bytes is not None:
            body.max_bytes = min(body.max_bytes, round(found[0] * (WINDOWS - 1) * WINDOW_S))

    def _mute(self, context: RequestContext, throttle_s: float) -> None:
        if throttle_s > 0.0 and context.connection is not None:
            self._muted[context.connection] = throttle_s

    def take_mute(self, connection: ServerConnection) -> float:
        """How long (s) not to read `connection` once its response is written: 0 when it is not throttled."""
        return self._muted.pop(connection, 0.0)
