"""The CUDA target backend: ``pip install tilelang[cuda]``.

Importing this package imports nothing heavy; the manifest lives in ``backend.py`` and the
components it names are imported on first use.
"""
