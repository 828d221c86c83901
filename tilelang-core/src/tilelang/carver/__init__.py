"""``tilelang.carver``: device descriptions and tile-configuration hints, with upstream
TileLang's import paths (``tilelang.carver.arch``, ``.arch.driver``, ``.template``,
``.roller``).

* ``arch.driver``: queries of the current GPU (SM count, shared memory, registers) through
  torch's device properties, or cuda-bindings where torch does not expose the attribute.
  Without a GPU they raise ``BackendUnavailableError`` saying so.
* ``arch.CUDA`` / ``arch.CDNA``: a device's limits for tiling decisions.
* ``template.MatmulTemplate(...).with_arch(arch).recommend_hints(topk)``: GEMM tile
  configurations that fit the device, ranked by a simple cost model. This is NOT upstream's
  roller (which analyses the TE graph and models memory traffic per level); see
  ``roller.policy``.
"""
