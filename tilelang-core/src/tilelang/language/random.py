"""Random numbers in a kernel: ``T.rng_init``, ``T.rng_rand``, ``T.rng_rand_float``.

Upstream's spelling of cuRAND's device API: each thread initializes its own generator
(``T.rng_init(seed, seq, off)``: a seed, a subsequence that sets streams apart, an offset
into the stream) and draws from it::

    T.rng_init(seed, 0, bx * 128 + tx * 4)
    A[i] = T.rng_rand()                        # uint32
    B[i] = T.rng_rand_float()                  # float32, uniform in (0, 1]
    C[i] = T.rng_rand_float(bit=64, dist="normal")

Core builds neutral ops; a backend with a generator lowers them (the CUDA backend:
Philox4x32-10 of its own, cuRAND's XORWOW and MRG32k3a through cuRAND's headers;
transform/random.py there), others refuse them by name. One generator per thread and
kernel: a draw reads the state the thread's last ``T.rng_init`` set.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..errors import LanguageError
from .kernel import get_block_binding, get_thread_binding
from .ops import CallEffectKind, _register

RNG_INIT, RNG_RAND, RNG_RAND_FLOAT = "tl.rng_init", "tl.rng_rand", "tl.rng_rand_float"
#: op -> how a kernel spells it (for error messages)
RANDOM_OPS = {RNG_INIT: "T.rng_init", RNG_RAND: "T.rng_rand", RNG_RAND_FLOAT: "T.rng_rand_float"}
for _op in RANDOM_OPS:  # opaque: each draw advances the thread's generator
    _register(_op, CallEffectKind.Opaque.value, _op.replace(".", "_"))

#: cuRAND's generator types, as upstream names them; the first is the default
GENERATORS = ("curandStatePhilox4_32_10_t", "curandStateXORWOW_t", "curandStateMRG32k3a_t")
DISTRIBUTIONS = ("uniform", "normal")


def _uint64(value: Any, what: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, tirx.PrimExpr)):
        raise LanguageError(f"T.rng_init: {what} must be an integer or an integer expression, got {value!r}")
    if isinstance(value, int):
        if not 0 <= value < 2 ** 64:
            raise LanguageError(f"T.rng_init: {what} {value} does not fit 64 unsigned bits")
        return tirx.const(value, "uint64")
    if not str(value.ty.dtype).startswith(("int", "uint")):
        raise LanguageError(f"T.rng_init: {what} must be an integer expression, got {value.ty.dtype}")
    return tirx.Cast("uint64", value)


def rng_init(seed: Any, seq: Any = None, off: Any = 0, generator: str = GENERATORS[0]) -> Any:
    """Start this thread's generator: ``seed`` (64 bits), subsequence ``seq`` (default: the
    thread's linear index in the grid, tx + bx * threads, as upstream), offset ``off``
    (draws skipped). ``generator`` names cuRAND's type; a backend that implements fewer
    says which it has."""
    if generator not in GENERATORS:
        raise LanguageError(f"T.rng_init: generator must be one of {list(GENERATORS)}, got {generator!r}")
    if seq is None:
        from .kernel import _ACTIVE

        if not _ACTIVE:
            raise LanguageError("T.rng_init is only valid inside a T.Kernel frame")
        threads = _ACTIVE[-1].threads[0]
        seq = get_thread_binding() + get_block_binding() * threads
    return tirx.call_intrin("void", RNG_INIT, _uint64(seed, "seed"), _uint64(seq, "seq"), _uint64(off, "off"),
                            tirx.StringImm(generator))


def rng_rand() -> Any:
    """The thread generator's next 32 random bits (uint32)."""
    return tirx.call_intrin("uint32", RNG_RAND)


def rng_rand_float(bit: int = 32, dist: str = "uniform") -> Any:
    """A random float32 (``bit=32``) or float64: ``dist="uniform"`` in (0, 1], or
    ``"normal"`` (mean 0, standard deviation 1)."""
    if bit not in (32, 64):
        raise LanguageError(f"T.rng_rand_float: bit must be 32 or 64, got {bit!r}")
    if dist not in DISTRIBUTIONS:
        raise LanguageError(f"T.rng_rand_float: dist must be one of {list(DISTRIBUTIONS)}, got {dist!r}")
    return tirx.call_intrin(f"float{bit}", RNG_RAND_FLOAT, tirx.StringImm(dist))


__all__ = ["DISTRIBUTIONS", "GENERATORS", "RANDOM_OPS", "rng_init", "rng_rand", "rng_rand_float"]
