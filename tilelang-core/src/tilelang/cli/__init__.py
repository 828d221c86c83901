"""The ``tilelang`` command line (``tilelang ...`` or ``python -m tilelang ...``).

Commands live in their own modules and are attached to the group in :mod:`.main`; data
collection (:mod:`.report`) is kept apart from rendering so that every output form agrees.
"""

from .main import main

__all__ = ["main"]
