"""The ROCm target backend: ``pip install tilelang[rocm]``.

Importing this package imports nothing heavy; the manifest lives in ``backend.py`` and the
components it names are imported on first use.
"""
