"""Connections from this broker to the others for the transaction protocol's broker-to-broker requests: a
coordinator's WriteTxnMarkers (markers.py) and a partition leader's AddPartitionsToTxn verify-only
(verification.py).

Rules:
- One connection per broker, kept open and shared by every request to it, on the inter-broker listener with the
  replica fetcher's link security (`ReplicaFetchers.link`), versions negotiated once as it opens.
- Concurrent first uses of a broker open one connection. A request that fails on a connection drops it (`drop`):
  the next use opens a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from epoch_broker.client.aio import KafkaClient


class InterBrokerClients:
    def __init__(self, broker: Any, client_id: str) -> None:  # broker.app.Broker, typed loosely (import cycle)
        self.broker = broker
        self.client_id = client_id
        self._clients: dict[int, KafkaClient] = {}
        self._opening: dict[int, asyncio.Future[KafkaClient]] = {}

    async def get(self, node_id: int) -> KafkaClient:
        """The connection to broker `node_id`, opened and negotiated; ConnectionError if it cannot be reached."""
        client = self._clients.get(node_id)
        if client is not None:
            return client
        opening = self._opening.get(node_id)
        if opening is None:
            opening = self._opening[node_id] = asyncio.ensure_future(self._open(node_id))
            opening.add_done_callback(lambda _: self._opening.pop(node_id, None))
        # shielded: a caller giving up (its own timeout) does not cancel the opening the others wait for
        return await asyncio.shield(opening)

    async def _open(self, node_id: int) -> KafkaClient:
        registration = self.broker.metadata.brokers.get(node_id)
        link = self.broker.replica_manager.fetchers.link
        if registration is None or link.security is None:
            raise ConnectionError(f"broker {node_id} is not reachable: {link.problem or 'not registered'}")
        host, port = registration.endpoint(link.listener)
        client = KafkaClient(host, port, f"{self.client_id}-{self.broker.node_id}", link.security)
        try:
            await client.open()
            await client.negotiate()
        except BaseException:
            with contextlib.suppress(Exception):
                await client.close()
            raise
        self._clients[node_id] = client
        return client

    def drop(self, node_id: int) -> None:
        """A request on the connection to `node_id` failed: close it; the next `get` opens another."""
        client = self._clients.pop(node_id, None)
        if client is not None:
            client.abort()

    async def close(self) -> None:
        for opening in list(self._opening.values()):
            opening.cancel()
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.close()
