"""Where the backend names used to live, kept importable for the code that imports them
from here (the engine, the JIT, the autotuner). One role per module now:

- :mod:`.manifest` — BackendModule, validated on construction;
- :mod:`.registration` — register_backend, register_execution_backend;
- :mod:`.context` — BackendContext, one compilation's resolved state;
- :mod:`.resolution` — create_backend_context: request -> context;
- :mod:`.availability` — probe.
"""

from __future__ import annotations

from .availability import probe
from .context import CODEGEN_ONLY, BackendContext
from .manifest import BackendModule
from .registration import register_backend, register_execution_backend
from .resolution import create_backend_context, execution_specs, select_module

__all__ = [
    "CODEGEN_ONLY",
    "BackendContext",
    "BackendModule",
    "create_backend_context",
    "execution_specs",
    "probe",
    "register_backend",
    "register_execution_backend",
    "select_module",
]
