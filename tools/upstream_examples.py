"""Run upstream TileLang's examples (tile-ai/tilelang `examples/`) against this project, unchanged.

    python tools/upstream_examples.py --examples /work/up/examples --mode lower [--arch sm_90]
        [--nvcc] [--only NAME] [--json out.json] [--timeout 300]

Modes (one subprocess per example, one at a time, each with a timeout, so a hang or a
crash in one example does not stop the rest):
  lower  import the example, build each kernel's PrimFunc with the arguments its main() or
         test uses (the recipe in tools/upstream_recipes/) and lower it for CUDA at the
         given arch; pass = CUDA source produced. --nvcc also compiles that source to a
         cubin (sm_90 -> sm_90a) through tilelang.cuda.toolchain and reports it separately.
  run    (a CUDA host) call the example's main() -- or the function its test_*.py calls,
         with the test's small arguments -- unchanged; pass = it returns (the example
         checks itself against torch).
  cpu    build each kernel with the recipe's small CPU sizes, compile it for the CPU target
         and, where the recipe has a torch reference, run and compare; else compile only
         (reported as "compiled").
  emulate  the cpu mode's kernels and references, lowered for CUDA at --arch instead and run
         by the lowered-IR emulator (tilelang-cuda/tests/lowered_emulator.py: every ldmatrix,
         mma, wgmma and shuffle as the IR says): a CUDA lowering's wrong result found on a
         machine without a GPU. A function's kernels run in launch order, sharing its
         T.alloc_global workspaces; instructions the emulator lacks (TMA, say) are reported
         as "not emulated", an access out of a buffer's bounds as a failure. Integer scalar
         arguments reach it as sizes (by parameter name); bfloat16 and fp8 travel as bits.

The kernels are never edited: the recipe only chooses arguments. Results are printed as
a table, grouped by failure cause, and written as JSON with --json.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from upstream_emulate import is_emulator_limit, run_emulated
from upstream_recipes import RECIPES, CpuCase, Kernel, ModAttr, Recipe, Splat, Tensor

DEFAULT_EXAMPLES = "/work/up/examples"
PASS_STATES = ("pass", "compiled", "skipped", "not emulated")  # the states that are not failures


# ---------------------------------------------------------------- failure causes

# (regex on "Type: message", category template). The first match names the cause; groups
# fill the template so that e.g. every missing T.<op> gets its own row in the summary.
_CAUSES: tuple[tuple[str, str], ...] = (
    (r"No module named '([\w.]+)'", "missing module {0}"),
    (r"cannot import name '(\w+)' from '([\w.]+)'", "missing {1}.{0}"),
    (r"module 'tilelang\.language' has no attribute '(\w+)'", "missing T.{0}"),
    (r"module '([\w.]+)' has no attribute '(\w+)'", "missing {0}.{1}"),
    (r"unexpected keyword argument '(\w+)'", "unsupported keyword {0}"),
    (r"unknown pass config\(s\) \[([^\]]+)\]", "unknown pass config {0}"),
    (r"JITFunction' object has no attribute '(\w+)'", "JITFunction lacks .{0} (eager mode)"),
    (r"T\.(const|empty)\b", "eager mode (T.const/T.empty)"),
    (r"(T\.\w+) is an? [^;]*?primitive this TileLang does not implement", "unimplemented {0}"),
    (r"'(\w+)' object has no attribute '(\w+)'", "{0} lacks .{1}"),
    (r"NameError: name '(\w+)' is not defined", "undefined name {0} (a star import came up short?)"),
    (r"(\w+)\(\) got multiple values for argument '(\w+)'", "{0}() got multiple values for {1}"),
    (r"(\w+)\(\) missing \d+ required positional argument", "{0}() missing arguments"),
    (r"(lowering|[\w ]*codegen) failed in target backend '\w+'.*?: (\w+): ([^:(]{0,50})",
     "{0}: {1}: {2}"),
    (r"CUDA driver|no CUDA GPUs|Torch not compiled with CUDA|cuda.*not available",
     "needs a CUDA device"),
)


def cause_of(phase: str, error: str) -> str:
    """A short category for a failure: the phase plus the first recognized pattern, or the
    exception type and the start of its message."""
    for pattern, template in _CAUSES:
        match = re.search(pattern, error, re.IGNORECASE)
        if match:
            return f"{phase}: " + template.format(*match.groups())
    head = error.split(":", 1)
    kind = head[0] if len(head) > 1 and re.fullmatch(r"[\w.]+", head[0]) else "error"
    detail = re.sub(r"\s+", " ", head[-1]).strip()
    detail = re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", detail)[:70]
    return f"{phase}: {kind}: {detail}"


def first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


# ---------------------------------------------------------------- the worker (one example)


class RecipeError(Exception):
    """A recipe that does not fit its example (harness bug, not a project failure)."""


def _import_example(path: Path, execute: bool = True) -> Any:
    """Import an example as its own test files do: its folder first on sys.path and as the
    working directory, argv holding only its path (examples parse argv in main())."""
    sys.path.insert(0, str(path.parent))
    os.chdir(path.parent)
    sys.argv = [str(path)]
    if not execute:
        return None
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _resolve(module: Any, value: Any) -> Any:
    if isinstance(value, ModAttr):
        obj = module
        for part in value.name.split("."):
            obj = getattr(obj, part)
        return obj
    if isinstance(value, Tensor):
        import torch

        return torch.empty(value.shape, dtype=getattr(torch, value.dtype))
    if isinstance(value, list):
        return [_resolve(module, v) for v in value]
    if isinstance(value, tuple):  # argument tuples: a Splat expands in place
        out: list[Any] = []
        for v in value:
            out.extend(v.make(module) if isinstance(v, Splat) else [_resolve(module, v)])
        return tuple(out)
    return value


def _jit_option(obj: Any, name: str) -> Any:
    """An option of a @tilelang.jit object: ours keeps them in .options, upstream's
    JITImpl as attributes."""
    options = getattr(obj, "options", None)
    if isinstance(options, dict) and name in options:
        return options[name]
    return getattr(obj, name, None)


def _undeclared(func: Any, out_idx: Any) -> Any:
    """``out_idx`` unless the PrimFunc declares its outputs itself (T.empty; giving both is
    upstream's "Out index conflict")."""
    attrs = getattr(func, "attrs", None)
    return None if attrs is not None and "tilelang_out_idx" in attrs else out_idx


def build_prim_func(module: Any, kernel: Kernel, cpu: bool = False) -> tuple[Any, Any]:
    """(PrimFunc, the JIT object or None) for one recipe kernel: a module-level prim_func
    as is; a @tilelang.jit object through get_tir (upstream's spelling, eager and lazy) or
    its builder; any other callable called, and a returned JIT object or kernel unwrapped."""
    from tvm.tirx import PrimFunc

    args, kwargs = kernel.args, dict(kernel.kwargs)
    if cpu and kernel.cpu is not None:
        args = kernel.cpu.args if kernel.cpu.args is not None else args
        kwargs.update(kernel.cpu.kwargs)
    args, kwargs = _resolve(module, args), {k: _resolve(module, v) for k, v in kwargs.items()}
    obj = _resolve(module, ModAttr(kernel.attr))
    jit_obj = None
    for _ in range(3):  # a builder may return a JIT object or a compiled kernel
        if isinstance(obj, PrimFunc):
            return obj, jit_obj
        inner = getattr(obj, "jit_impl", None) or getattr(obj, "jit_fn", None)
        if inner is not None:  # an @autotune wrapper (upstream: .jit_impl); the recipe gives the config
            obj = inner
            continue
        if hasattr(obj, "get_tir"):
            jit_obj, obj = obj, obj.get_tir(*args, **kwargs)
        elif hasattr(obj, "builder") and callable(obj.builder):
            jit_obj, obj = obj, obj.builder(*args, **kwargs)
        elif hasattr(obj, "prim_func"):
            obj = obj.prim_func
        elif callable(obj):
            obj = obj(*args, **kwargs)
        else:
            break
        args, kwargs = (), {}
    raise RecipeError(f"{kernel.attr} gave {type(obj).__name__}, not a PrimFunc (an eager kernel "
                      "that ran instead of building?)")


def _kernel_hash(source: str) -> str:
    """The kernels' code, without the helper header before them: whether a change of the
    compiler left a lowering byte-identical (compare two --json runs)."""
    start = source.find('extern "C" __global__')
    return hashlib.sha256(source[max(start, 0):].encode()).hexdigest()[:16]


def _lower_kernel(module: Any, kernel: Kernel, arch: str, nvcc: bool) -> dict[str, Any]:
    import tilelang

    out: dict[str, Any] = {"kernel": kernel.label}
    phase = "build"
    try:
        func, jit_obj = build_prim_func(module, kernel)
        phase = "lower"
        artifact = tilelang.lower(func, target={"kind": "cuda", "arch": arch},
                                  out_idx=_undeclared(func, _jit_option(jit_obj, "out_idx")),
                                  pass_configs=_jit_option(jit_obj, "pass_configs"))
        if not artifact.device_source:
            raise RecipeError("lowering produced no CUDA source")
        out.update(status="pass", source_lines=artifact.device_source.count("\n"),
                   kernel_sha256=_kernel_hash(artifact.device_source))
        if nvcc:
            phase = "nvcc"
            from tilelang.cuda.toolchain import compile_cubin

            cubin_arch = arch + "a" if arch == "sm_90" else arch
            cubin = compile_cubin(artifact.device_source, cubin_arch, artifact.kernel_name)
            out.update(nvcc="pass", cubin_bytes=len(cubin))
    except Exception as exc:  # noqa: BLE001 -- every failure is a result to report
        _record_failure(out, phase, exc)
        if phase == "nvcc":
            out["status"], out["nvcc"] = "pass", "fail"
    return out


def _cpu_kernel(module: Any, kernel: Kernel) -> dict[str, Any]:
    import tilelang
    import torch

    out: dict[str, Any] = {"kernel": kernel.label}
    phase = "build"
    case: CpuCase | None = kernel.cpu
    try:
        func, jit_obj = build_prim_func(module, kernel, cpu=True)
        phase = "cpu compile"
        out_idx = _jit_option(jit_obj, "out_idx")
        if case is not None and case.out_idx is not None:
            out_idx = list(case.out_idx)
        compiled = tilelang.compile(func, out_idx=_undeclared(func, out_idx), target="cpu",
                                    pass_configs=_jit_option(jit_obj, "pass_configs"))
        if case is None or case.inputs is None:
            out["status"] = "compiled"
            return out
        phase = "cpu run"
        gen = torch.Generator().manual_seed(0)
        inputs = case.inputs(gen)
        want = case.ref(*_fresh(inputs))
        got = compiled(*inputs)
        got = list(got) if isinstance(got, (list, tuple)) else ([] if got is None else [got])
        got += [inputs[i] for i in case.inplace]
        phase = "cpu check"
        _check_outputs(got, want, case)
        out["status"] = "pass"
    except Exception as exc:  # noqa: BLE001
        _record_failure(out, phase, exc)
    return out


def _fresh(inputs: list[Any]) -> list[Any]:
    """The inputs as the reference sees them: the kernel's in-place outputs change the
    tensors, so they are copied; a plain value (an int scalar argument) goes as it is."""
    return [x.clone() if hasattr(x, "clone") else x for x in inputs]


def _check_outputs(got: list[Any], want: Any, case: CpuCase) -> None:
    """The kernel's outputs against the reference's, within the recipe's tolerances."""
    import numpy as np
    import torch

    want = list(want) if isinstance(want, (list, tuple)) else [want]
    if len(got) != len(want):
        raise RecipeError(f"kernel gave {len(got)} outputs, the reference {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        g = torch.as_tensor(np.asarray(g)) if not isinstance(g, torch.Tensor) else g
        torch.testing.assert_close(g.double(), w.double(), rtol=case.rtol, atol=case.atol,
                                   msg=lambda m, i=i: f"output {i}: {m}")


def _emulated_kernel(module: Any, kernel: Kernel, arch: str) -> dict[str, Any]:
    """The cpu mode's kernel and reference, the kernel lowered for CUDA and run in the
    lowered-IR emulator."""
    import tilelang
    import torch

    out: dict[str, Any] = {"kernel": kernel.label}
    phase = "build"
    case: CpuCase | None = kernel.cpu
    try:
        func, jit_obj = build_prim_func(module, kernel, cpu=True)
        if case is None or case.inputs is None:
            out["status"] = "skipped"
            return out
        phase = "lower"
        from tilelang.jit.eager import declared_options

        out_idx = list(case.out_idx) if case.out_idx is not None else _jit_option(jit_obj, "out_idx")
        artifact = tilelang.lower(func, target={"kind": "cuda", "arch": arch}, out_idx=_undeclared(func, out_idx),
                                  pass_configs=_jit_option(jit_obj, "pass_configs"))
        out_idx, _ = declared_options(func, _undeclared(func, out_idx), None)  # T.empty's outputs too
        phase = "emulate"
        gen = torch.Generator().manual_seed(0)
        inputs = case.inputs(gen)
        want = case.ref(*_fresh(inputs))
        outputs = [] if out_idx is None else ([out_idx] if isinstance(out_idx, int) else list(out_idx))
        outputs = [i % len(func.params) for i in outputs]
        got = run_emulated(func, artifact, inputs, outputs, case.inplace)
        phase = "emulate check"
        _check_outputs(got, want, case)
        out["status"] = "pass"
    except Exception as exc:  # noqa: BLE001
        if phase == "emulate" and is_emulator_limit(exc):  # the emulator's limit, not the kernel's
            out.update(status="not emulated", error=first_line(str(exc)))
        else:
            _record_failure(out, phase, exc)
    return out


def _record_failure(out: dict[str, Any], phase: str, exc: BaseException) -> None:
    error = f"{type(exc).__name__}: {exc}"
    out.update(status="fail", phase=phase, error=first_line(error), cause=cause_of(phase, error),
               traceback=traceback.format_exc()[-3000:])


def _install_cuda_shim() -> None:
    """For examples that make CUDA tensors at import time (lower/cpu modes on a machine
    without a GPU): torch factories given device="cuda" and Tensor.cuda() stay on the CPU.
    Kernel code is untouched; only those module-level inputs move."""
    import torch

    if torch.cuda.is_available():
        return

    def on_cpu(factory: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "cpu"
            return factory(*args, **kwargs)
        return wrapped

    for name in ("rand", "randn", "randint", "zeros", "ones", "empty", "full", "arange", "tensor"):
        setattr(torch, name, on_cpu(getattr(torch, name)))
    torch.Tensor.cuda = lambda self, *a, **k: self


def _declare_num_sms(count: int) -> None:
    """Without a GPU, tilelang.carver's SM count query answers the recipe's declared count
    (the kernel is only lowered); with one, the device answers."""
    import torch
    from tilelang.carver.arch import driver

    if not torch.cuda.is_available():
        driver.get_num_sms = lambda device_id=0: count


def run_worker(recipe: Recipe, examples: Path, mode: str, arch: str, nvcc: bool) -> dict[str, Any]:
    """Everything for one example, in this (sub)process."""
    result: dict[str, Any] = {"example": recipe.name, "mode": mode}
    started = time.time()
    try:
        if recipe.cuda_shim and mode != "run":
            _install_cuda_shim()
        if recipe.num_sms and mode != "run":
            _declare_num_sms(recipe.num_sms)
        if mode == "run" and recipe.run.attr == "__main__":
            import runpy

            _import_example(examples / recipe.path, execute=False)
            runpy.run_path(str(examples / recipe.path), run_name="__main__")
            result.update(status="pass", seconds=round(time.time() - started, 1))
            return result
        module = _import_example(examples / recipe.path)
    except BaseException as exc:  # noqa: BLE001 -- SystemExit from argparse included
        _record_failure(result, "run" if mode == "run" else "import", exc)
        result["seconds"] = round(time.time() - started, 1)
        return result
    if mode == "run":
        try:
            fn = _resolve(module, ModAttr(recipe.run.attr))
            fn(*recipe.run.args, **dict(recipe.run.kwargs))
            result["status"] = "pass"
        except BaseException as exc:  # noqa: BLE001
            _record_failure(result, "run", exc)
    else:
        work = {"lower": lambda k: _lower_kernel(module, k, arch, nvcc), "cpu": lambda k: _cpu_kernel(module, k),
                "emulate": lambda k: _emulated_kernel(module, k, arch)}[mode]
        kernels = [work(k) for k in recipe.kernels]
        result["kernels"] = kernels
        failed = [k for k in kernels if k["status"] not in PASS_STATES]
        if failed:
            result.update({k: failed[0][k] for k in ("phase", "error", "cause")}, status="fail")
        else:
            states = {k["status"] for k in kernels}
            result["status"] = next((s for s in ("compiled", "not emulated") if s in states),
                                    "skipped" if states == {"skipped"} else "pass")
        if mode == "lower" and nvcc and not failed:
            result["nvcc"] = "pass" if all(k.get("nvcc") == "pass" for k in kernels) else "fail"
            bad = [k for k in kernels if k.get("nvcc") == "fail"]
            if bad:
                result["nvcc_error"], result["nvcc_cause"] = bad[0]["error"], bad[0]["cause"]
    result["seconds"] = round(time.time() - started, 1)
    return result


# ---------------------------------------------------------------- the driver


def run_one(recipe: Recipe, args: argparse.Namespace) -> dict[str, Any]:
    """One example in a fresh subprocess; a timeout or a crash is a result too."""
    with tempfile.TemporaryDirectory(prefix="upstream-example-") as tmp:
        result_file = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", recipe.name,
               "--mode", args.mode, "--examples", str(args.examples), "--arch", args.arch,
               "--result", str(result_file)] + (["--nvcc"] if args.nvcc else [])
        started = time.time()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"example": recipe.name, "mode": args.mode, "status": "fail", "phase": "timeout",
                    "error": f"no result within {args.timeout} s", "cause": "timeout",
                    "seconds": args.timeout}
        if result_file.exists():
            return json.loads(result_file.read_text())
        tail = (proc.stderr or proc.stdout)[-2000:]
        return {"example": recipe.name, "mode": args.mode, "status": "fail", "phase": "crash",
                "error": f"worker exited {proc.returncode} without a result: {first_line(tail[-300:])}",
                "cause": f"crash (exit {proc.returncode})", "traceback": tail,
                "seconds": round(time.time() - started, 1)}


def summarize(results: list[dict[str, Any]], mode: str, nvcc: bool) -> str:
    lines = []
    width = max(len(r["example"]) for r in results)
    for r in results:
        extra = f" nvcc={r.get('nvcc', '-')}" if nvcc else ""
        cause = "" if r["status"] in PASS_STATES else f"  [{r.get('cause')}] {r.get('error', '')[:110]}"
        lines.append(f"{r['example']:<{width}}  {r['status']:<8}{extra} {r.get('seconds', 0):6.1f}s{cause}")
    states = Counter(r["status"] for r in results)
    lines.append("")
    lines.append(f"{mode}: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
                 + f" of {len(results)} examples")
    if nvcc:
        lines.append("nvcc: " + ", ".join(f"{n} {s}" for s, n in
                                          sorted(Counter(r.get("nvcc", "-") for r in results).items())))
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if r["status"] not in PASS_STATES:
            groups.setdefault(r["cause"], []).append(r)
        if r.get("nvcc") == "fail":
            groups.setdefault(r["nvcc_cause"], []).append({**r, "error": r["nvcc_error"]})
    if groups:
        lines.append("\nfailure causes:")
        for cause, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  {len(rs):3d}  {cause}")
            lines.append(f"       e.g. {rs[0]['example']}: {rs[0]['error'][:160]}")
            if len(rs) > 1:
                lines.append("       also: " + ", ".join(r["example"] for r in rs[1:]))
    return "\n".join(lines)


def markdown_table(paths: list[Path]) -> str:
    """One row per example from earlier --json results (any of lower / cpu / run): each
    mode's status, nvcc where lowered, and the first failure's cause."""
    runs = {}
    for path in paths:
        data = json.loads(path.read_text())
        runs[data["mode"]] = {r["example"]: r for r in data["results"]}
    modes = [m for m in ("lower", "run", "cpu") if m in runs]
    heads = {"lower": "lower sm_90", "run": "H200 run", "cpu": "cpu"}
    names = list(dict.fromkeys(n for m in modes for n in runs[m]))
    lines = ["| example | " + " | ".join(heads[m] for m in modes) + (" | nvcc" if "lower" in runs else "")
             + " | cause (first failure) |",
             "| --- |" + " --- |" * (len(modes) + ("lower" in runs) + 1)]
    for name in names:
        cells, cause = [], ""
        for m in modes:
            r = runs[m].get(name)
            cells.append(r["status"] if r else "-")
            if r and r["status"] not in PASS_STATES and not cause:
                cause = r.get("cause", "") or m
        if "lower" in runs:
            cells.append(runs["lower"].get(name, {}).get("nvcc", "-"))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {cause.replace('|', '/')[:110]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=Path, default=Path(DEFAULT_EXAMPLES),
                        help="upstream's examples/ folder")
    parser.add_argument("--mode", choices=("lower", "run", "cpu", "emulate"), default="lower")
    parser.add_argument("--arch", default="sm_90", help="CUDA arch for --mode lower")
    parser.add_argument("--nvcc", action="store_true", help="lower mode: also compile a cubin")
    parser.add_argument("--only", action="append", default=[],
                        help="examples whose name contains this (repeatable)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per example")
    parser.add_argument("--jobs", type=int, default=1,
                        help="examples at a time (subprocesses; e.g. 8 on a 16-core GPU host)")
    parser.add_argument("--select-from", type=Path,
                        help="only the examples that passed in this earlier --json result (e.g. of --mode lower)")
    parser.add_argument("--table", type=Path, nargs="+",
                        help="print a markdown table of earlier --json results (lower, cpu, run) and exit")
    parser.add_argument("--list", action="store_true", help="list the recipes and exit")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.table:
        print(markdown_table(args.table))
        return 0
    by_name = {r.name: r for r in RECIPES}
    if args.worker:
        result = run_worker(by_name[args.worker], args.examples.resolve(), args.mode, args.arch, args.nvcc)
        args.result.write_text(json.dumps(result, indent=1))
        return 0
    chosen = [r for r in RECIPES if not args.only or any(o in r.name for o in args.only)]
    if args.select_from:
        earlier = json.loads(args.select_from.read_text())["results"]
        passed = {r["example"] for r in earlier if r["status"] in PASS_STATES}
        chosen = [r for r in chosen if r.name in passed]
    if args.list or not chosen:
        for r in RECIPES:
            print(f"{r.name:<60} {len(r.kernels)} kernel(s)  run: {r.run.attr}")
        return 0 if chosen else 1
    if not args.examples.is_dir():
        parser.error(f"--examples {args.examples}: not a directory; point it at upstream's examples/")
    args.examples = args.examples.resolve()
    from concurrent.futures import ThreadPoolExecutor

    def one(recipe: Recipe) -> dict[str, Any]:
        result = run_one(recipe, args)
        mark = result["status"] if result["status"] in PASS_STATES else f"FAIL [{result.get('cause')}]"
        print(f"{recipe.name}: {mark} ({result.get('seconds', 0)} s)", flush=True)
        return result

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:  # each example is a subprocess
        results = list(pool.map(one, chosen))
    print()
    print(summarize(results, args.mode, args.nvcc))
    if args.json:
        args.json.write_text(json.dumps({"mode": args.mode, "arch": args.arch, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
