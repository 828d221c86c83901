"""LowerRandom: ``T.rng_init`` / ``T.rng_rand`` / ``T.rng_rand_float`` as Philox4x32-10.

Each kernel that draws random numbers gets one generator state per thread: a local array of
11 words (``tl_device.h``, ``tl_rng_*``) allocated at the top of the kernel, so that a draw
sees the state however the passes after this one split the block around barriers (upstream's
test draws after a T.rng_init inside a branch that holds a block-wide scan). The ops become
calls of the helpers with the state's address: ``tl_rng_init(state, seed, subsequence,
offset)``, ``tl_rng_next`` for 32 random bits, ``tl_rng_{uniform,normal}{32,64}``.

The helpers implement cuRAND's Philox generator (the default of upstream's T.rng_init):
its 32-bit draws equal cuRAND's and Triton's ``tl.randint4x`` for the same seed and
offsets. cuRAND's XORWOW and MRG32k3a generators skip ahead with precomputed matrices that
are part of cuRAND; a kernel that names them is refused with the generator this backend has.
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
    for call in calls:
        if op_name(call) == RNG_INIT and str(call.args[3].value) != _PHILOX:
            raise LanguageError(f"T.rng_init(..., generator={str(call.args[3].value)!r}): the CUDA backend's "
                                f"generator is Philox4x32-10, cuRAND's {_PHILOX!r} (the default); cuRAND's other "
                                "generators skip ahead with tables of their own. Leave generator= out, or name "
                                f"{_PHILOX!r}")
    state = tirx.decl_buffer((STATE_WORDS,), "uint32", name="rng_state", scope="local")
    address = tirx.address_of(tirx.BufferLoad(state, [tirx.const(0, "int32")]))

    def on_call(call: Any) -> Any:
        name = op_name(call)
        if name == RNG_INIT:
            seed, subsequence, offset, _ = call.args
            return tirx.call_extern("void", "tl_rng_init", address, seed, subsequence, offset)
        if name == RNG_RAND:
            return tirx.call_extern("uint32", "tl_rng_next", address)
        if name == RNG_RAND_FLOAT:
            dtype = str(call.ty.dtype)
            return tirx.call_extern(dtype, f"tl_rng_{call.args[0].value}{dtype[len('float'):]}", address)
        return call

    body = tvm_ffi.structural_map(func.body, (tirx.Call, on_call), order="post")
    start = _kernel_body_start(body)

    def on_start(node: Any) -> Any:
        return tirx.SeqStmt([tirx.AllocBuffer(state), node]) if node.same_as(start) else node

    return func.with_body(tvm_ffi.structural_map(body, (tirx.Stmt, on_start), order="pre"))


def LowerRandom() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _lower(func), "tl.cuda.LowerRandom", per_kernel=True)
