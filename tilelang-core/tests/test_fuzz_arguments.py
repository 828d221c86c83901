"""Property tests over argument validation on both CPU execution backends (issue 15, item 7).

Each example builds one call the way a careless user might (wrong dtype, rank or extent,
0-size, non-contiguous views, read-only and masked arrays, byte-swapped dtypes, torch
tensors, scalars out of range or of the wrong kind, None, wrong argument counts, keyword
arguments good and bad) and runs it on tvm_ffi and on cython. Each backend must either give
numpy's result, with its inputs unchanged, or refuse with a TileLangError that has a
message (and leave a caller's output untouched); never another exception, never a crash.
The two must agree, and where the generator knows the answer (a mutation the shared rules
refuse, or a call with nothing wrong) they must give it.

Kernels compile once per module into a private cache. Case counts: the settings profile
``TILELANG_FUZZ_PROFILE`` (``ci``: 1000 calls per backend in all; ``nightly``: 10,000+,
the ``nox -s fuzz`` session).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")  # the [test] extra; wheel_tests' venv lacks it
import tilelang
import tilelang.language as T
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tilelang.errors import TileLangError
from tilelang.testing.kernels import elementwise_add

try:
    import torch
except ImportError:  # the numpy cases still run
    torch = None

BACKENDS = (("cpu", "tvm_ffi"), ("c", "cython"))
ROWS, COLS = 8, 4

PROFILE = os.environ.get("TILELANG_FUZZ_PROFILE", "ci")
# derandomized in CI (the same 1000 calls every run: no flaky red); random in the nightly
settings.register_profile("tilelang-fuzz-ci", deadline=None, database=None, derandomize=True, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("tilelang-fuzz-nightly", deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
if PROFILE not in ("ci", "nightly"):
    raise ValueError(f"TILELANG_FUZZ_PROFILE={PROFILE!r}: use 'ci' or 'nightly'")
BASE = settings.get_profile(f"tilelang-fuzz-{PROFILE}")
# calls per backend across the four argument tests (each example calls both backends)
CALLS = {"ci": 1000, "nightly": 12000}[PROFILE]
TALLY: collections.Counter[tuple[str, str]] = collections.Counter()

ACCEPT, REFUSE, EITHER = "accept", "refuse", "either"


def sum_scaled():
    n = T.symbolic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "int64"), B: T.Tensor((n,), "int64"), s: T.int32, C: T.Tensor((n,), "int64")):
        with T.Kernel(T.ceildiv(n, 16)) as bx:
            for i in T.Parallel(16):
                if bx * 16 + i < n:
                    C[bx * 16 + i] = A[bx * 16 + i] + B[bx * 16 + i] * T.cast(s, "int64")

    return main


def scale_float():
    n = T.symbolic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), f: T.float32, Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 16)) as bx:
            for i in T.Parallel(16):
                if bx * 16 + i < n:
                    Y[bx * 16 + i] = X[bx * 16 + i] * f

    return main


KERNELS: dict[str, tuple[Callable[[], Any], list[int] | None]] = {
    "add_out": (lambda: elementwise_add(ROWS, COLS), [-1]),  # C allocated and returned
    "add_inplace": (lambda: elementwise_add(ROWS, COLS), None),  # C passed by the caller
    "sum_scaled": (sum_scaled, [-1]),
    "scale_float": (scale_float, [-1]),
}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory):
    """Every kernel on both backends, compiled once, into a cache of this module's own (the
    autouse private-cache fixture is per test and starts after a module fixture)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("fuzz-cache")))
        built = {(name, execution): tilelang.compile(make(), out_idx=out_idx, target=target,
                                                    execution_backend=execution)
                 for name, (make, out_idx) in KERNELS.items() for target, execution in BACKENDS}
    yield built
    if TALLY:
        print("\nargument fuzz, calls per backend:", dict(sorted(TALLY.items())))


# -- one call, described -------------------------------------------------------------------

@dataclass
class Call:
    """A call to one kernel: its arguments, what numpy says it gives, and what the shared
    rules say the backends must do (ACCEPT, REFUSE, or EITHER where both are sound)."""

    kernel: str
    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    expect: Callable[[], np.ndarray] | None = None
    verdict: str = ACCEPT
    out: Any = None  # a caller's output (add_inplace), however it is passed
    why: list[str] = field(default_factory=list)

    def spoil(self, verdict: str, why: str) -> None:
        self.why.append(why)
        if verdict == REFUSE or self.verdict == REFUSE:
            self.verdict = REFUSE
        elif verdict == EITHER or self.verdict == EITHER:
            self.verdict = EITHER


def as_numpy(x: Any) -> np.ndarray:
    return x.numpy() if torch is not None and isinstance(x, torch.Tensor) else np.asarray(x)


def snapshot(x: Any) -> Any:
    if torch is not None and isinstance(x, torch.Tensor) and x.device.type != "cpu":
        return None  # a meta tensor has no data
    if isinstance(x, np.ndarray) or (torch is not None and isinstance(x, torch.Tensor)):
        return as_numpy(x).copy()
    return None


def run(kernel: tilelang.JITKernel, call: Call) -> tuple[str, Any]:
    """("ok", the result as numpy) or ("refused", the error); anything else fails the test."""
    given = [*call.args, *call.kwargs.values()]
    before = [snapshot(a) for a in given]
    try:
        out = kernel(*call.args, **call.kwargs)
    except TileLangError as e:
        assert str(e).strip(), f"{type(e).__name__} without a message"
        # nothing ran: a caller's output keeps what it held, inputs too
        for arg, old in zip(given, before):
            if old is not None:
                np.testing.assert_array_equal(as_numpy(arg), old, err_msg="an argument changed on a refusal")
        return "refused", e
    for arg, old in zip(given, before):
        if old is not None and arg is not call.out:
            np.testing.assert_array_equal(as_numpy(arg), old, err_msg="an input changed")
    return "ok", as_numpy(call.out if call.kernel == "add_inplace" else out)


# -- argument strategies -------------------------------------------------------------------

OTHER_DTYPES = ["float16", "float64", "int8", "int32", "int64", "uint8", "bool", "complex64", "float32", "int16"]


def tensor_variants(draw: st.DrawFn, call: Call, base: np.ndarray, name: str, written: bool) -> Any:
    """``base`` (the right value) as passed some way; ``call`` learns whether it is sound."""
    kind = draw(st.sampled_from(["numpy"] * 10 + ["torch"] * 6 + ["read_only", "from_bytes", "wrong_dtype", "byteswap",
                                 "wrong_shape", "wrong_rank", "strided", "reversed", "fortran", "masked", "none",
                                 "list", "scalar", "offset_view", "meta"]))
    if kind in ("torch", "meta") and torch is None:
        kind = "numpy"
    if kind == "numpy":
        return base
    if kind == "torch":
        return torch.from_numpy(base.copy())
    if kind == "read_only":
        x = base.copy()
        x.flags.writeable = False
        call.spoil(REFUSE if written else ACCEPT, f"{name}: read-only")
        return x
    if kind == "from_bytes":
        call.spoil(REFUSE if written else ACCEPT, f"{name}: over bytes")
        return np.frombuffer(base.tobytes(), dtype=base.dtype).reshape(base.shape)
    if kind == "wrong_dtype":
        dtype = draw(st.sampled_from([d for d in OTHER_DTYPES if d != str(base.dtype)]))
        call.spoil(REFUSE, f"{name}: dtype {dtype}")
        with np.errstate(over="ignore", invalid="ignore"):
            x = base.astype(dtype)
        return torch.from_numpy(x) if torch is not None and dtype != "complex64" and draw(st.booleans()) else x
    if kind == "byteswap":
        call.spoil(REFUSE, f"{name}: byte-swapped")
        return base.astype(base.dtype.newbyteorder())
    if kind == "wrong_shape" and name == "sym":  # extents that disagree: sum_scaled_calls
        kind = "wrong_rank"
    if kind == "wrong_shape":
        shape = list(base.shape)
        axis = draw(st.integers(0, len(shape) - 1))
        shape[axis] = draw(st.integers(0, 12).filter(lambda d: d != base.shape[axis]))
        call.spoil(REFUSE, f"{name}: shape {shape}")
        return np.zeros(shape, base.dtype)
    if kind == "wrong_rank":
        shape = base.shape + (1,) if draw(st.booleans()) else base.shape[:-1]
        call.spoil(REFUSE, f"{name}: rank {len(shape)}")
        return np.zeros(shape, base.dtype)
    if kind in ("strided", "reversed", "fortran"):
        as_torch = torch is not None and kind != "reversed" and draw(st.booleans())  # torch has no negative strides
        if kind == "strided":
            wide = np.zeros(base.shape[:-1] + (base.shape[-1] * 2,), base.dtype)
            wide[..., ::2] = base
            x = torch.from_numpy(wide)[..., ::2] if as_torch else wide[..., ::2]
        elif kind == "reversed":
            x = np.ascontiguousarray(base[::-1])[::-1]
        else:
            x = torch.from_numpy(np.ascontiguousarray(base.T)).mT if as_torch and base.ndim == 2 else (
                torch.from_numpy(base.copy()) if as_torch else np.asfortranarray(base))
        contiguous = x.is_contiguous() if as_torch else x.flags.c_contiguous
        # a view over one element (or none) is contiguous whatever its strides say
        call.spoil(EITHER if contiguous else REFUSE, f"{name}: {kind} view")
        return x
    if kind == "offset_view":  # contiguous but starting one element into its allocation
        flat = np.concatenate([np.zeros(1, base.dtype), base.ravel()])
        call.spoil(EITHER, f"{name}: offset view")
        return flat[1:].reshape(base.shape)
    if kind == "masked":
        call.spoil(REFUSE, f"{name}: masked")
        return np.ma.masked_array(base.copy(), mask=np.zeros(base.shape, bool))
    if kind == "none":
        call.spoil(REFUSE, f"{name}: None")
        return None
    if kind == "list":
        call.spoil(REFUSE, f"{name}: list")
        return base.tolist()
    if kind == "scalar":
        call.spoil(REFUSE, f"{name}: scalar")
        return draw(st.sampled_from([0, 1.5, "x", b"ab"]))
    call.spoil(REFUSE, f"{name}: on the meta device")
    return torch.empty(base.shape, dtype=getattr(torch, str(base.dtype)), device="meta")


def int32_scalar(draw: st.DrawFn, call: Call) -> tuple[Any, int]:
    """An argument for an int32 parameter and the value a kernel would see."""
    kind = draw(st.sampled_from(["int", "int", "numpy", "out_of_range", "bool", "float", "none", "str", "zero_d",
                                 "numpy_bool"]))
    if kind == "int":
        v = draw(st.integers(-(2**31), 2**31 - 1))
        return v, v
    if kind == "numpy":
        dtype = draw(st.sampled_from(["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]))
        info = np.iinfo(dtype)
        v = draw(st.integers(int(info.min), int(info.max)))
        if not -(2**31) <= v < 2**31:
            call.spoil(REFUSE, f"s: {dtype} {v}")
        return np.dtype(dtype).type(v), v
    if kind == "out_of_range":
        v = draw(st.one_of(st.integers(2**31, 2**80), st.integers(-(2**80), -(2**31) - 1)))
        call.spoil(REFUSE, f"s: {v}")
        return v, 0
    if kind == "bool":
        call.spoil(REFUSE, "s: bool")
        return draw(st.booleans()), 0
    if kind == "numpy_bool":
        call.spoil(REFUSE, "s: numpy bool")
        return np.bool_(draw(st.booleans())), 0
    if kind == "float":
        call.spoil(REFUSE, "s: float")
        return draw(st.sampled_from([1.0, 2.5, float("nan"), np.float32(3.0), np.float64(-1.0)])), 0
    if kind == "none":
        call.spoil(REFUSE, "s: None")
        return None, 0
    if kind == "str":
        call.spoil(REFUSE, "s: str")
        return "3", 0
    v = draw(st.integers(-100, 100))  # a 0-d integer array is an integer to __index__
    call.spoil(EITHER, "s: 0-d array")
    return np.array(v, dtype="int64"), v


def float32_scalar(draw: st.DrawFn, call: Call) -> tuple[Any, float]:
    kind = draw(st.sampled_from(["float", "float", "int", "numpy", "special", "huge", "past_double", "none", "str",
                                 "complex",
                                 "bool"]))
    if kind == "float":
        v = draw(st.floats(-1e6, 1e6, allow_nan=False))
        return v, v
    if kind == "int":
        v = draw(st.integers(-(2**40), 2**40))
        return v, float(v)
    if kind == "numpy":
        v = draw(st.sampled_from([np.float16, np.float32, np.float64, np.int32]))(
            draw(st.floats(-1e3, 1e3, allow_nan=False, width=32)))
        return v, float(v)
    if kind == "special":
        v = draw(st.sampled_from([float("inf"), float("-inf"), float("nan"), -0.0, 1e-45]))
        return v, v
    if kind == "huge":  # float32 overflows to inf, as numpy's cast does
        v = draw(st.sampled_from([1e39, -1e300, 2**63, -(2**64), 2**200]))
        return v, float(v)
    if kind == "past_double":
        call.spoil(REFUSE, "f: int past any float")
        return draw(st.sampled_from([2**1024, -(3**700)])), 0.0
    if kind == "none":
        call.spoil(REFUSE, "f: None")
        return None, 0.0
    if kind == "str":
        call.spoil(REFUSE, "f: str")
        return "1.0", 0.0
    if kind == "complex":
        call.spoil(REFUSE, "f: complex")
        return 1 + 2j, 0.0
    call.spoil(EITHER, "f: bool")
    v = draw(st.booleans())
    return v, float(v)


def rand_array(draw: st.DrawFn, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-(2**20), 2**20, shape).astype(dtype)


def call_form(draw: st.DrawFn, call: Call, names: list[str]) -> None:
    """Passes ``call.args`` (one per input, in order) by position, by keyword, or wrongly."""
    form = draw(st.sampled_from(["positional"] * 8 + ["keywords", "mixed", "too_few", "too_many",
                                 "unknown_keyword", "twice", "output_keyword", "stream"]))
    args = call.args
    if form == "keywords":
        order = draw(st.permutations(range(len(names))))
        call.args, call.kwargs = [], {names[i]: args[i] for i in order}
    elif form == "mixed":
        k = draw(st.integers(0, len(names)))
        call.args, call.kwargs = args[:k], {names[i]: args[i] for i in range(k, len(names))}
    elif form == "too_few":
        call.args = args[:draw(st.integers(0, len(args) - 1))]
        call.spoil(REFUSE, "too few")
    elif form == "too_many":
        call.args = args + [args[0]] * draw(st.integers(1, 2))
        call.spoil(REFUSE, "too many")
    elif form == "unknown_keyword":
        call.kwargs = {draw(st.sampled_from(["X", "a", "out", "self", "args"])): args[0]}
        call.spoil(REFUSE, "unknown keyword")
    elif form == "twice":
        call.kwargs = {names[0]: args[0]}
        call.spoil(REFUSE, "given twice")
    elif form == "output_keyword":
        call.kwargs = {"C" if "C" in KNOWN_OUTPUTS[call.kernel] else "Y": args[0]}
        call.spoil(REFUSE, "an output by keyword")
    elif form == "stream":  # the launch keyword: a CPU kernel has no stream to take
        call.kwargs = {"stream": draw(st.sampled_from([0, None]))}
        call.spoil(EITHER, "stream=")


KNOWN_OUTPUTS = {"add_out": ("C",), "add_inplace": (), "sum_scaled": ("C",), "scale_float": ("Y",)}


@st.composite
def add_calls(draw: st.DrawFn, inplace: bool) -> Call:
    a, b = rand_array(draw, (ROWS, COLS), "float32"), rand_array(draw, (ROWS, COLS), "float32")
    call = Call("add_inplace" if inplace else "add_out", [], expect=lambda: a + b)
    call.args = [tensor_variants(draw, call, a, "A", False), tensor_variants(draw, call, b, "B", False)]
    names = ["A", "B"]
    if inplace:
        call.out = tensor_variants(draw, call, np.full((ROWS, COLS), UNWRITTEN, "float32"), "C", True)
        call.args.append(call.out)
        names.append("C")
    call_form(draw, call, names)
    return call


@st.composite
def sum_scaled_calls(draw: st.DrawFn) -> Call:
    n = draw(st.integers(0, 40))
    a, b = rand_array(draw, (n,), "int64"), rand_array(draw, (n,), "int64")
    call = Call("sum_scaled", [])
    A = tensor_variants(draw, call, a, "sym", False)
    if draw(st.integers(0, 9)) == 0:  # the symbolic extent differs between A and B
        m = draw(st.integers(0, 40).filter(lambda m: m != n))
        b = rand_array(draw, (m,), "int64")
        call.spoil(REFUSE, f"n: {n} and {m}")
    B = tensor_variants(draw, call, b, "sym", False)
    s, sv = int32_scalar(draw, call)
    call.args = [A, B, s]
    call.expect = lambda: a + b * np.int64(sv)
    call_form(draw, call, ["A", "B", "s"])
    return call


@st.composite
def scale_float_calls(draw: st.DrawFn) -> Call:
    n = draw(st.integers(0, 40))
    x = rand_array(draw, (n,), "float32")
    call = Call("scale_float", [])
    X = tensor_variants(draw, call, x, "sym", False)
    f, fv = float32_scalar(draw, call)
    call.args = [X, f]
    with np.errstate(over="ignore", invalid="ignore"):
        expected = x * np.float32(fv)
    call.expect = lambda: expected
    call_form(draw, call, ["X", "f"])
    return call


UNWRITTEN = -7.0


def reset_output(call: Call) -> None:
    """Refill a caller's output before each backend's call: a result left by the other
    backend must not pass for this one's."""
    if isinstance(call.out, np.ndarray) or (torch is not None and isinstance(call.out, torch.Tensor)):
        view = as_numpy(call.out) if str(getattr(call.out, "device", "cpu")) == "cpu" else None
        if view is not None and view.flags.writeable:
            with np.errstate(invalid="ignore"):  # a wrong-dtype output (uint8, bool) holds what it can
                view[...] = np.float32(UNWRITTEN).astype(view.dtype)


def check(kernels: dict, call: Call) -> None:
    outcomes = {}
    for _, execution in BACKENDS:
        reset_output(call)
        outcome, value = run(kernels[call.kernel, execution], call)
        TALLY[execution, outcome] += 1
        outcomes[execution] = outcome
        context = f"{execution}, {call.kernel}, {call.why or 'a sound call'}, keywords {sorted(call.kwargs)}"
        if outcome == "ok":
            assert call.verdict != REFUSE, f"{context}: accepted a call the shared rules refuse"
            np.testing.assert_array_equal(value, call.expect(), err_msg=f"{context}: wrong result")
        else:
            assert call.verdict != ACCEPT, f"{context}: refused a sound call: {value}"
    assert len(set(outcomes.values())) == 1, f"the backends disagree: {outcomes} on {call.why}"


def empty(dtype: str) -> np.ndarray:
    return np.zeros(0, dtype)  # numpy 2 gives it zero strides, which DLPack calls not compact


def read_only_empty() -> np.ndarray:
    x = empty("int64")
    x.flags.writeable = False
    return x


# the bugs this test found, kept as explicit cases: a bare TypeError for kernel(self=...);
# tvm_ffi refusing (LaunchError, "expected to be compact") a 0-size torch tensor made by
# torch.from_numpy and a read-only 0-size array; a float parameter given an int past int64
# on the torch fast path (tvm_ffi: "expected float"), or past any double (OverflowError)
@settings(BASE, max_examples=CALLS // 4)
@example(call=Call("add_out", [], {"self": np.zeros((ROWS, COLS), "float32")}, verdict=REFUSE))
@given(call=add_calls(inplace=False))
def test_fixed_shape_kernel(kernels, call: Call) -> None:
    check(kernels, call)


@settings(BASE, max_examples=CALLS // 4)
@given(call=add_calls(inplace=True))
def test_callers_output(kernels, call: Call) -> None:
    check(kernels, call)


@settings(BASE, max_examples=CALLS // 4)
@example(call=Call("sum_scaled", [empty("int64"), torch.from_numpy(empty("int64")) if torch else empty("int64"), 3],
                   expect=lambda: empty("int64")))
@example(call=Call("sum_scaled", [read_only_empty(), read_only_empty(), 3], expect=lambda: empty("int64")))
@given(call=sum_scaled_calls())
def test_symbolic_extent_and_int_scalar(kernels, call: Call) -> None:
    check(kernels, call)


@settings(BASE, max_examples=CALLS // 4)
@example(call=Call("scale_float", [np.ones(3, "float32"), 2**64], expect=lambda: np.full(3, 2.0**64, "float32")))
@example(call=Call("scale_float", [torch.ones(3) if torch else np.ones(3, "float32"), 2**64],
                   expect=lambda: np.full(3, 2.0**64, "float32")))
@example(call=Call("scale_float", [np.ones(3, "float32"), 2**1024], verdict=REFUSE))
@given(call=scale_float_calls())
def test_float_scalar(kernels, call: Call) -> None:
    check(kernels, call)
