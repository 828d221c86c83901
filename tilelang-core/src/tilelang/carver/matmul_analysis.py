"""Upstream's GEMM analysis module names: the SM-version parser the carver shares
(``check_sm_version``, one definition in ``arch.cuda``) and the tensorization check."""

from .arch.cuda import check_sm_version
from .utils import get_tensorized_func_and_tags

__all__ = ["check_sm_version", "get_tensorized_func_and_tags"]
