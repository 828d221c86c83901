"""Execution-backend adapters. Plugin distributions add subpackages here
(tilelang.jit.adapter.nvrtc, tilelang.jit.adapter.cython)."""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
