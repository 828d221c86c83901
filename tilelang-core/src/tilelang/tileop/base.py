"""``GemmWarpPolicy`` where upstream TileLang's kernels import it from."""

from ..language.misc import GemmWarpPolicy

__all__ = ["GemmWarpPolicy"]
