"""The small Kafka client over `protocol/` only: what talks to a broker from outside its request path.

`connection.py` is sans-IO (correlation ids, version negotiation, frames in and out), `aio.py` puts it on
asyncio streams (replica fetchers, the remote controller channel, admin, drills), `blocking.py` on plain
sockets (Spark executors, scripts). It imports nothing of ours but `protocol`.
"""
