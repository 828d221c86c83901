"""LowerRandom: ``T.rng_init`` / ``T.rng_rand`` / ``T.rng_rand_float`` on CUDA.

Each kernel that draws random numbers gets one generator state per thread, a local array
allocated at the top of the kernel, so that a draw sees the state however the passes after
this one split the block around barriers (upstream's test draws after a T.rng_init inside a
branch that holds a block-wide scan). The ops become calls of helpers with the state's
address: an init (seed, subsequence, offset), 32 random bits, uniform and normal floats of
32 and 64 bits.

- Philox4x32-10 (cuRAND's ``curandStatePhilox4_32_10_t``, upstream's default): 11 words
  and ``tl_device.h``'s ``tl_rng_*``, needing no header. Its 32-bit draws equal cuRAND's
  and Triton's ``tl.randint4x`` for the same seed and offsets.
- cuRAND's XORWOW and MRG32k3a: they skip ahead with cuRAND's precomputed matrices, so
  they are cuRAND's own (``tl_curand.h``'s ``tl_curand_*_<generator>``, over
  ``curand_kernel.h``): 8 64-bit words read as the generator's cuRAND state. Compiling such
  a kernel needs cuRAND's headers (``pip install tilelang-cuda[curand]``); the toolchain
  says so where they are missing.

A kernel draws from one generator: its T.rng_init calls name the same one.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tilelang.errors import LanguageError
from tilelang.plugin import (
    RNG_GENERATORS,
    RNG_INIT,
    RNG_RAND,
    RNG_RAND_FLOAT,
    kernels_of,
    prim_func_pass,
)
from tvm import tirx

from .explicit_sync import op_name

STATE_WORDS = 11
_PHILOX = RNG_GENERATORS[0]
#: cuRAND's generators other than Philox -> the suffix of tl_curand.h's helpers
CURAND_HELPERS = {"curandStateXORWOW_t": "xorwow", "curandStateMRG32k3a_t": "mrg32k3a"}
CURAND_STATE_WORDS = 8  # tl_curand.h's TL_CURAND_STATE_WORDS (64-bit words)


def _kernel_body_start(body: Any) -> Any:
    """The statement under the kernel's launch attributes (its thread and block extents),
    which host statements may precede (a sub-byte or solved parameter's prologue)."""
    launches = kernels_of(body)
    body = launches[0] if launches else body
    while isinstance(body, tirx.AttrStmt) and body.attr_key == "thread_extent":
        body = body.body
    return body


def _lower(func: Any) -> Any:
    calls: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.Call, lambda c: calls.append(c)
                                        if op_name(c) in (RNG_INIT, RNG_RAND, RNG_RAND_FLOAT) else None))
    if not calls:
        return func
    generators = sorted({str(call.args[3].value) for call in calls if op_name(call) == RNG_INIT})
    if len(generators) > 1:
        raise LanguageError(f"T.rng_init: one kernel draws from one generator; this one names {generators}. "
                            "Give each generator a kernel of its own, or name one of them in every T.rng_init")
    generator = generators[0] if generators else _PHILOX
    suffix = CURAND_HELPERS.get(generator)
    if suffix is None:
        state = tirx.decl_buffer((STATE_WORDS,), "uint32", name="rng_state", scope="local")
        names = {"init": "tl_rng_init", "next": "tl_rng_next", "float": "tl_rng_{}{}"}
    else:
        state = tirx.decl_buffer((CURAND_STATE_WORDS,), "uint64", name="rng_state", scope="local")
        names = {"init": f"tl_curand_init_{suffix}", "next": f"tl_curand_next_{suffix}",
                 "float": "tl_curand_{}{}_" + suffix}
    address = tirx.address_of(tirx.BufferLoad(state, [tirx.const(0, "int32")]))

    def on_call(call: Any) -> Any:
        name = op_name(call)
        if name == RNG_INIT:
            seed, subsequence, offset, _ = call.args
            return tirx.call_extern("void", names["init"], address, seed, subsequence, offset)
        if name == RNG_RAND:
            return tirx.call_extern("uint32", names["next"], address)
        if name == RNG_RAND_FLOAT:
            dtype = str(call.ty.dtype)
            return tirx.call_extern(dtype, names["float"].format(call.args[0].value, dtype[len("float"):]), address)
        return call

    body = tvm_ffi.structural_map(func.body, (tirx.Call, on_call), order="post")
    start = _kernel_body_start(body)

    def on_start(node: Any) -> Any:
        return tirx.SeqStmt([tirx.AllocBuffer(state), node]) if node.same_as(start) else node

    return func.with_body(tvm_ffi.structural_map(body, (tirx.Stmt, on_start), order="pre"))


def LowerRandom() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _lower(func), "tl.cuda.LowerRandom", per_kernel=True)
