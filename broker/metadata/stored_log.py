"""The controller's metadata log as its stores keep it, for the code that checks a data dir before any store
is opened: the default store's file name and the error every store raises when its records cannot be read back.

Declared here, below controller/ (whose stores in controller/store/ use both) and log_dirs.py (the start-up
checks, which controller/server.py runs), so that log_dirs.py does not import the controller's package.
"""

from __future__ import annotations

FILE_NAME = "cluster-metadata.log"  # FileMetadataStore's, in the data dir


class CorruptMetadataLog(Exception):
    """The stored metadata cannot be read back: the start stops (guessing at cluster metadata is worse)."""
