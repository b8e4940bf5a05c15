"""The registry of declared APIs: every module in this package that defines `API` is one Kafka API.

Adding an API is adding one module; nothing else needs to know about it.
"""

from __future__ import annotations

import importlib
import pkgutil

from epoch_broker.protocol.schema import Api


def _discover() -> dict[int, Api]:
    apis: dict[int, Api] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        api = getattr(importlib.import_module(f"{__name__}.{info.name}"), "API", None)
        if isinstance(api, Api):
            if api.key in apis:
                raise RuntimeError(f"API key {api.key} declared by both {apis[api.key].name} and {api.name}")
            apis[api.key] = api
    return apis


APIS: dict[int, Api] = _discover()
