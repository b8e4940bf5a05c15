"""Bytes between sockets and handlers: `server.py` (connections, frames, sendfile) and `dispatch.py` (the
handler registry, ApiVersions derived from it, request decoding, fault rules)."""
