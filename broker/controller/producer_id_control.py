"""Producer ids (Kafka's ProducerIdControlManager): blocks of ids handed to brokers (AllocateProducerIds), each
block a ProducerIdsRecord holding the next id free.

Rules:
- A block is never handed out twice, across controller restarts and failovers too: the next id free is in the
  metadata log, and a block counts as handed out once its record is committed.
- Blocks are PRODUCER_ID_BLOCK ids, Kafka's size.
"""

from __future__ import annotations

from epoch_broker.broker.controller.controller_result import ControllerResult
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.metadata.records import ProducerIdsRecord

PRODUCER_ID_BLOCK = 1000


class ProducerIdControlManager:
    def __init__(self, image: MetadataCache) -> None:
        self.image = image

    def allocate_producer_ids(self, node_id: int) -> ControllerResult[tuple[int, int]]:
        """A block of never-used producer ids for a broker: (first id, count)."""
        start = self.image.next_producer_id
        return ControllerResult([ProducerIdsRecord(node_id, start + PRODUCER_ID_BLOCK)], (start, PRODUCER_ID_BLOCK))
