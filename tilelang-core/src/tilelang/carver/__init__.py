"""``tilelang.carver``: device descriptions and tile-configuration hints, with upstream
TileLang's import paths (``tilelang.carver.arch``, ``.arch.driver``, ``.template``,
``.roller``, ``.utils``, ``.matmul_analysis``).

* ``arch.driver``: queries of the current GPU (SM count, shared memory, registers) through
  torch's device properties, or cuda-bindings where torch does not expose the attribute.
  Without a GPU they raise ``BackendUnavailableError`` saying so.
* ``arch.CUDA`` / ``arch.CDNA`` / ``arch.CPU``: a device's limits for tiling decisions;
  ``arch.get_arch(target)`` / ``arch.auto_infer_current_arch()`` pick the one a target's
  backend declares (its manifest's ``device_model``).
* templates (``MatmulTemplate``, ``GEMVTemplate``, ``ElementwiseTemplate``,
  ``GeneralReductionTemplate``, ``FlashAttentionTemplate``, ``ConvTemplate``):
  ``.with_arch(arch).recommend_hints(topk)`` gives tile configurations that fit the device,
  ranked by a roofline estimate; ``equivalent_function()`` is the computation as a PrimFunc.
* ``DefaultPolicy`` / ``TensorCorePolicy`` ``.from_prim_func(func, arch, tags)`` or
  ``.from_output_nodes([OutputNode(PrimFuncNode(func))], arch, tags)`` search the tiles of
  any function written with blocks (``tvm.te.create_prim_func``);
  ``utils.get_tensorized_func_and_tags(func, target)`` says whether it is a GEMM the
  target's matrix units take.

These searches are NOT upstream's roller (which models memory traffic per level of the
hierarchy over a fused graph); see ``roller.policy``. They rank candidates to measure with
``tilelang.autotune``.
"""

from . import arch, matmul_analysis, roller, template, utils
from .arch import CDNA, CPU, CUDA, TileDevice
from .roller import (
    DefaultPolicy,
    Edge,
    Hint,
    IntrinInfo,
    OutputNode,
    PrimFuncNode,
    TensorCorePolicy,
)
from .roller.rasterization import (
    NoRasterization,
    Rasterization2DColumn,
    Rasterization2DRow,
)
from .template import (
    ConvTemplate,
    ElementwiseTemplate,
    FlashAttentionTemplate,
    GEMVTemplate,
    GeneralReductionTemplate,
    MatmulTemplate,
)

__all__ = ["CDNA", "CPU", "CUDA", "ConvTemplate", "DefaultPolicy", "Edge", "ElementwiseTemplate",
           "FlashAttentionTemplate", "GEMVTemplate", "GeneralReductionTemplate", "Hint", "IntrinInfo",
           "MatmulTemplate", "NoRasterization", "OutputNode", "PrimFuncNode", "Rasterization2DColumn",
           "Rasterization2DRow", "TensorCorePolicy", "TileDevice", "arch", "matmul_analysis", "roller",
           "template", "utils"]
