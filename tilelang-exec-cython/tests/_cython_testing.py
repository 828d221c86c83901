"""Helpers shared by these tests (a module name no other test folder uses)."""

from __future__ import annotations

from typing import Any


def declared_execution_backends(target: Any) -> list[str]:
    """The execution backends the target's manifest declares for ``target``, in its order:
    end-to-end tests run on each, so a backend added to a manifest is tested too."""
    from tilelang.backend import create_backend_context

    context = create_backend_context(target, execution_backend=None)
    return [s.name for s in context.module.execution_backends
            if s.supports_target is None or s.supports_target(context.target)]
