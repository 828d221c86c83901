"""Acme's TileLang backend (an example vendor distribution): the ``acme`` target backend
and the ``acme_log`` execution backend. Importing this package registers nothing: tilelang
loads ``tilelang_acme.backend`` and ``tilelang_acme.execution_backend`` through their entry
points."""

__version__ = "0.1.0"
