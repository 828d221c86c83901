"""What every carver template shares: ``with_arch(arch)``, ``recommend_hints(topk)`` (the
tile search over the template's ``equivalent_function()``), and upstream's
``get_hardware_aware_configs``."""

from __future__ import annotations

from typing import Any

from ...errors import LanguageError
from ..roller.hint import Hint


def positive(template: str, **values: Any) -> None:
    """LanguageError naming the first value that is not a positive int."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise LanguageError(f"{template}: {name} must be a positive int, got {value!r}")


class BaseTemplate:
    """A computation whose tile configurations the carver recommends for a device."""

    arch: Any = None

    def with_arch(self, arch: Any) -> BaseTemplate:
        self.arch = arch
        return self

    def equivalent_function(self) -> Any:
        raise NotImplementedError

    def recommend_hints(self, topk: int = 10) -> list[Hint]:
        if self.arch is None:
            raise LanguageError(f"{type(self).__name__}.recommend_hints: no device; call "
                                ".with_arch(tilelang.carver.arch.get_arch(...)) first "
                                "(or auto_infer_current_arch())")
        return self._hints(topk)

    def _hints(self, topk: int) -> list[Hint]:
        from ..roller.policy import DefaultPolicy

        return DefaultPolicy.from_prim_func(self.equivalent_function(), self.arch,
                                            name=type(self).__name__).emit_config(topk)

    def get_hardware_aware_configs(self, arch: Any = None, topk: int = 10) -> list[Hint]:
        if arch is not None:
            self.arch = arch
        return self.recommend_hints(topk)
