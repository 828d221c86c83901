"""``import tvm`` after ``import tilelang`` (tilelang.tvm_import): TVM ends up holding what it
holds when imported without the window — the same operators, printer names, global
functions and object types, disco absent alike — with TVM's own functions back in place
afterwards, and without raising a C++ error on the way (the first C++ error of a process
pays for libbacktrace's reading of every library's debug information, 0.4-0.8 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# what TVM holds after `import tilelang; import tvm`, and whether its functions are its own
STATE = r"""
import json, sys, time
import tilelang
import tvm, tvm_ffi
from tvm import ir
from tvm_ffi import core, registry

names = sorted(str(n) for n in ir.Op.list_op_names())
printer = {}
for n in names:
    held = ir.Op.get(n).get_attr("TScriptPrinterName")
    printer[n] = None if held is None else str(held)
state = {
    "ops": names,
    "printer": printer,
    "funcs": sorted(registry.list_global_func_names()),
    "types": sorted(str(k) for k in tvm_ffi.get_global_func("ffi.GetRegisteredTypeKeys")()),
    "disco": repr(tvm.runtime.disco),
    "own": [type(ir._ffi_api.GetOp).__module__, type(ir._ffi_api.RegisterOpAttr).__module__,
            type(core._object_type_key_to_index).__name__, registry.list_global_func_names.__module__],
    "hooks": [type(f).__name__ for f in sys.meta_path if type(f).__module__.startswith("tilelang")],
}
raise_error = tvm_ffi.get_global_func("testing.test_raise_error")
costs = []
for _ in range(3):
    start = time.perf_counter()
    try:
        raise_error("ValueError", "x")
    except ValueError:
        pass
    costs.append(time.perf_counter() - start)
state["error_costs"] = costs
try:
    ir.Op.get("tirx.no_such_operator")
except AttributeError as err:  # raised by TVM's C++ again
    state["missing"] = str(err).splitlines()[0]
print(json.dumps(state))
"""


def tvm_state(loud: bool) -> dict:
    env = dict(os.environ, TILELANG_LOUD_TVM_IMPORT="1" if loud else "0")
    done = subprocess.run([sys.executable, "-c", STATE], check=False, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def quiet_and_loud() -> tuple[dict, dict]:
    return tvm_state(loud=False), tvm_state(loud=True)


def test_tvm_holds_the_same_with_and_without_the_window(quiet_and_loud) -> None:
    quiet, loud = quiet_and_loud
    assert len(quiet["ops"]) > 1000
    for key in ("ops", "printer", "funcs", "types", "disco"):
        assert quiet[key] == loud[key], key
    assert quiet["printer"]["tirx.s_tir.ldg32"] == "s_tir.ldg32"  # registered twice at one level
    assert quiet["disco"] == "None"  # this TVM build has no disco runtime


def test_tvm_functions_are_its_own_again_after_the_import(quiet_and_loud) -> None:
    quiet, loud = quiet_and_loud
    assert quiet["own"] == loud["own"] == ["tvm_ffi.core", "tvm_ffi.core", "cython_function_or_method",
                                           "tvm_ffi.registry"]
    assert quiet["hooks"] == []  # both import hooks removed themselves
    assert quiet["missing"] == loud["missing"]
    assert quiet["missing"].endswith("Operator tirx.no_such_operator is not registered")


def test_the_first_cpp_error_comes_after_the_import(quiet_and_loud) -> None:
    """The first C++ error of a process costs libbacktrace's start (hundreds of ms), later
    ones a fraction of a millisecond: with the window, the first one raised after
    ``import tvm`` is the process's first; without it, ``import tvm`` paid already."""
    quiet, loud = quiet_and_loud
    first, *later = quiet["error_costs"]
    assert first > 20 * max(later), quiet["error_costs"]
    first, *later = loud["error_costs"]
    assert first < 20 * max(later) or first < 0.02, loud["error_costs"]
