"""Developer sessions. The README's two commands are `nox -s demo` and `nox -s tests wheel_tests`.

- demo:        compile and run the examples on the best available backend
- tests:       the test suites of every distribution, against editable installs
- wheels:      every first-party distribution's wheel (no dependencies) into dist/
- wheel_tests: build a wheelhouse of every distribution and its dependencies, install
               `tilelang` from it offline into a clean venv, and run the core tests there;
               then the vendor example (examples/vendor-backend) from its wheel, and the
               conformance suite on acme and on the CPU (tvm_ffi, cython)
- lint:        ruff
- fuzz:        the hypothesis fuzz tests, nightly profile (not run by CI's .ci/run)
- mutants:     mutation testing (cosmic-ray) of the binders, cache key, plugin loader, tile-op
               lowering and tensor-core layout glue; kill rate per group (not run by CI)
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).parent
# Every first-party distribution: a folder with a pyproject.toml (core first).
DISTRIBUTIONS = sorted(
    (p.parent for p in ROOT.glob("tilelang-*/pyproject.toml")),
    key=lambda p: (p.name != "tilelang-core", p.name),
)
# the example third-party distribution (tilelang-acme), built and tested from its wheel
VENDOR_EXAMPLE = ROOT / "examples" / "vendor-backend"
# CPU torch for tests that take torch tensors; the CPU wheel is pinned so that pip never
# pulls a multi-GB CUDA build on a machine without a GPU.
TORCH_CPU = "torch==2.13.0"

# the autotuner's tunes through Ray (tilelang-core[ray]), run apart in `tests`
RAY_TESTS = "tilelang-core/tests/test_autotune_ray.py"
# the meta distribution's extras whose distributions exist in this repository
EXTRAS_PRESENT = [extra for extra, dist in (("cuda", "tilelang-cuda"), ("nvrtc", "tilelang-exec-nvrtc"),
                                            ("rocm", "tilelang-rocm"), ("cutedsl", "tilelang-cutedsl"),
                                            ("cython", "tilelang-exec-cython"))
                  if (ROOT / dist / "pyproject.toml").is_file()]

#: nox -s mutants: each group's code, and the only tests run against each of its mutants
#: (those that cover it: every mutant costs one run of them). "path::a,B.c" mutates those
#: definitions only; tests are pytest arguments from the repository root, globs expanded.
MUTANTS = {
    "binders": {
        "code": ["tilelang-core/src/tilelang/jit/fastbind.py", "tilelang-core/src/tilelang/jit/arguments.py"],
        "tests": ["tilelang-core/tests/test_fast_binder.py", "tilelang-core/tests/test_binder_contract.py",
                  "tilelang-core/tests/test_reliability_arguments.py",
                  "tilelang-core/tests/test_cpu_kernels.py::TestArgumentErrors", "-k", "not cython"],
    },
    "cache_key": {
        "code": ["tilelang-core/src/tilelang/cache/__init__.py::cache_key",
                 "tilelang-core/src/tilelang/jit/kernel.py::_kernel_key",
                 "tilelang-core/src/tilelang/jit/fingerprint.py",
                 "tilelang-core/src/tilelang/backend/context.py::BackendContext.fingerprint"],
        "tests": ["tilelang-core/tests/test_cache_key.py", "tilelang-core/tests/test_plugin_cache_key.py",
                  "tilelang-core/tests/test_request_index.py", "tilelang-core/tests/test_cache.py", "-k",
                  "key or fingerprint"],
    },
    "loader": {
        "code": ["tilelang-core/src/tilelang/plugins/loader.py"],
        "tests": ["tilelang-core/tests/test_plugin_loader.py", "tilelang-core/tests/test_coexistence.py",
                  "tilelang-core/tests/test_routing.py"],
    },
    "tile_ops": {  # copies, fills, reductions, scans, atomics (gemm: the CPU's micro-kernels)
        "code": ["tilelang-core/src/tilelang/transform/reduce_kinds.py",
                 ("tilelang-core/src/tilelang/transform/lower_tile_ops.py::"
                  "TileOpLowering.in_bounds,TileOpLowering.tile_axes,TileOpLowering.indices,"
                  "TileOpLowering.copy,TileOpLowering.fill,TileOpLowering._reduce_layout,TileOpLowering.reduce,"
                  "TileOpLowering.cumsum,TileOpLowering.atomic")],
        "tests": ["tilelang-core/tests/test_tile_op_lowering.py", "tilelang-core/tests/test_tile_ops.py",
                  "tilelang-core/tests/test_atomics_reductions.py", "-k", "not gemm"],
    },
    "mma_layout": {
        "code": ["tilelang-cuda/src/tilelang/cuda/transform/mma_layout.py",
                 "tilelang-cuda/src/tilelang/cuda/intrinsics/mma_layout.py"],
        "tests": ["tilelang-cuda/tests/test_*emulation*.py", "tilelang-cuda/tests/test_tensor_core.py",
                  "tilelang-cuda/tests/test_layout_values.py",
                  # upstream's spelling of the swizzles (tilelang.cuda.intrinsics)
                  "tilelang-core/tests/test_upstream_modules.py", "-k", "swizzle or frozen or emulat or tensor"],
    },
}
#: mutants run per group at most, drawn with a fixed seed (posargs: --sample 0 runs all): the
#: groups hold ~4,300 mutants at 5-20 s each on 2 cores, so running them all takes about a day
MUTANTS_SAMPLE = 30

nox.options.sessions = ["tests", "wheel_tests"]
nox.options.reuse_existing_virtualenvs = True


def install_editable(session: nox.Session) -> None:
    args = []
    for dist in DISTRIBUTIONS:
        args += ["-e", f"{dist}[test]" if dist.name == "tilelang-core" else str(dist)]
    session.install(*args)


@nox.session
def demo(session: nox.Session) -> None:
    install_editable(session)
    session.run("tilelang", "backends", "list")
    session.run("python", "examples/run_all.py", *session.posargs)


def ensure_hipcc(session: nox.Session) -> None:
    """tilelang-rocm's tests compile HIP to gfx90a code objects with hipcc (in CI a missing
    hipcc fails them). Debian/Ubuntu's ``hipcc`` package (it brings clang/lld/LLVM 15 and the
    ROCm device libraries; no GPU driver) is installed when hipcc is missing and this is CI
    or root; idempotent: nothing runs once hipcc is on the PATH. About 25 s with a warm
    mirror (measured 2026-11-30)."""
    if shutil.which("hipcc") or not shutil.which("apt-get"):
        return
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if not root and not os.environ.get("CI"):
        session.log("hipcc not found: tilelang-rocm's compile tests will skip (apt-get install hipcc)")
        return
    sudo = [] if root else ["sudo", "-n"]
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    session.run(*sudo, "apt-get", "update", "-qq", external=True, env=env)
    session.run(*sudo, "apt-get", "install", "-y", "-qq", "hipcc", external=True, env=env)


@nox.session
def tests(session: nox.Session) -> None:
    session.install(TORCH_CPU)
    install_editable(session)
    # the autotuner's RayExecutor extra (ray: about 25 s to install from the index, 285 MB),
    # plot_layout's (vis: matplotlib) and cuRAND's headers for T.rng_init's XORWOW and
    # MRG32k3a kernels, compiled by nvcc where it is installed (curand: nvidia-curand, 61 MB)
    session.install("-e", f"{ROOT / 'tilelang-core'}[ray,vis]", "-e", f"{ROOT / 'tilelang-cuda'}[curand]")
    ensure_hipcc(session)
    test_dirs = [str(d / "tests") for d in DISTRIBUTIONS if (d / "tests").is_dir()]
    # two workers: compiles are single-threaded, and CI machines have 2 cores
    # the vendor example's tests need its wheel installed: wheel_tests runs them
    session.run("python", "-m", "pytest", "-q", "-ra", "-n", "2", *test_dirs, "examples",
                f"--ignore={VENDOR_EXAMPLE.relative_to(ROOT)}", f"--ignore={RAY_TESTS}", *session.posargs)
    # tunes on a local two-CPU Ray cluster, after the rest: its processes would compete with
    # the xdist workers (about 45 s on an idle 2-core machine); 5: posargs selected none
    session.run("python", "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider", RAY_TESTS, *session.posargs,
                env={"TILELANG_TEST_RAY": "1"}, success_codes=[0, 5])


@nox.session
def wheels(session: nox.Session) -> None:
    """Every first-party distribution's wheel, without dependencies, into dist/; install with
    `pip install --find-links dist 'tilelang[cuda,nvrtc]'` (README, "Installing")."""
    out = ROOT / "dist"
    shutil.rmtree(out, ignore_errors=True)
    session.install("pip>=23", "hatchling>=1.21")
    session.run("python", "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--wheel-dir",
                str(out), str(ROOT), *map(str, DISTRIBUTIONS))
    session.log(f"wheels in {out}: " + ", ".join(sorted(p.name for p in out.glob("*.whl"))))


@nox.session
def wheel_tests(session: nox.Session) -> None:
    wheelhouse = ROOT / "wheelhouse"
    shutil.rmtree(wheelhouse, ignore_errors=True)
    session.install("pip>=23", "build")
    # our distributions (built from source) plus every dependency, as wheels
    session.run("python", "-m", "pip", "wheel", "-q", "--wheel-dir", str(wheelhouse),
                str(ROOT), *map(str, DISTRIBUTIONS), str(VENDOR_EXAMPLE), "pytest", "pytest-xdist", TORCH_CPU)
    # a clean venv with nothing from the source tree, installed with no index at all
    venv = Path(session.create_tmp()).resolve() / "offline-venv"
    shutil.rmtree(venv, ignore_errors=True)
    session.run("python", "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    extras = ",".join(EXTRAS_PRESENT)
    session.run(python, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse),
                f"tilelang[{extras}]" if extras else "tilelang", "pytest", "pytest-xdist", TORCH_CPU,
                external=True)
    session.run(python, "-c", "import tilelang, sys; f = tilelang.__file__; print(f); "
                "sys.exit(0 if 'site-packages' in f else 'tilelang imported from the source tree')",
                external=True)
    session.run(str(venv / "bin" / "tilelang"), "backends", "list", external=True)
    ensure_hipcc(session)
    # every distribution's tests, copied out of the tree so that only the installed wheels
    # are importable (-m "not slow": the throwaway-plugin tests build their own wheels from
    # the source tree and already ran in the tests session)
    copies = Path(session.create_tmp()).resolve() / "tests"
    shutil.rmtree(copies, ignore_errors=True)
    for dist in DISTRIBUTIONS:
        if (dist / "tests").is_dir():
            shutil.copytree(dist / "tests", copies / dist.name)
    session.chdir(str(copies))
    for dist in DISTRIBUTIONS:
        if (copies / dist.name).is_dir():
            session.run(python, "-m", "pytest", "-q", "-ra", "-n", "2", "-p", "no:cacheprovider", "-m", "not slow",
                        dist.name, *session.posargs, external=True)
    # the vendor example from its wheel, next to every first-party distribution (nothing
    # denied): its own tests plus the conformance suite on acme, then the suite on the CPU
    # through both of its execution backends (tilelang.testing.conformance_plugin)
    session.run(python, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse),
                "tilelang-acme", external=True)
    shutil.copytree(VENDOR_EXAMPLE / "tests", copies / "vendor-backend")
    conformance = [python, "-m", "pytest", "-q", "-ra", "-n", "2", "-p", "no:cacheprovider"]
    session.run(*conformance, "--tilelang-backend=acme", "vendor-backend", external=True)
    for execution_backend in ("tvm_ffi", "cython"):
        session.run(*conformance, "--tilelang-backend=cpu", f"--tilelang-execution-backend={execution_backend}",
                    "--pyargs", "tilelang.testing.conformance_tests", external=True)
    # the GPU backends cannot run here: every case lowered and compiled by their toolchains
    # (nvcc for sm_90, hipcc for gfx90a); the H200 runs them with --tilelang-backend=cuda
    for gpu_target in ('{"kind": "cuda", "arch": "sm_90"}', "hip"):
        session.run(*conformance, f"--tilelang-backend={gpu_target}", "--tilelang-conformance=compile",
                    "--pyargs", "tilelang.testing.conformance_tests", external=True)


@nox.session
def fuzz(session: nox.Session) -> None:
    """The fuzz tests with the nightly profile (12,000 argument calls per CPU execution
    backend, 240 tile-shape kernels); CI runs the same files with the small ci profile in
    `tests`. Not a default session."""
    session.install(TORCH_CPU)
    install_editable(session)
    tests = ROOT / "tilelang-core" / "tests"
    session.run("python", "-m", "pytest", "-q", "-ra", "-s", "-p", "no:cacheprovider",
                str(tests / "test_fuzz_arguments.py"), str(tests / "test_fuzz_tile_shapes.py"), *session.posargs,
                env={"TILELANG_FUZZ_PROFILE": "nightly"})


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")


@nox.session
def mutants(session: nox.Session) -> None:
    """Mutation testing: for each group of MUTANTS, every mutant (or a fixed-seed sample of
    MUTANTS_SAMPLE) runs that group's tests; prints the kill rate per group and overall and
    writes report.json and report.md (each survivor's diff) under .nox/mutants/tmp/report.
    Posargs go to tools/mutants.py: group names, --sample N, --seed S. Not a default session.

    cosmic-ray rather than mutmut 3: mutmut 3 rewrites every function into a trampoline in a
    copy under ./mutants that must be importable as top-level packages, and runs each mutant
    in a fork of one pytest process that has already imported TVM, LLVM and torch (thread
    pools that do not survive fork); our ``tilelang`` is one namespace package assembled
    from several distributions' ``src`` folders. cosmic-ray edits the file itself and runs
    any command in a fresh process, so the editable layout needs nothing; tools/mutants.py
    runs it in a copy of the tree (put first on PYTHONPATH), never the checkout."""
    session.install(TORCH_CPU, "cosmic-ray==8.7.0")
    install_editable(session)
    tmp = Path(session.create_tmp()).resolve()
    plan = tmp / "plan.json"
    plan.write_text(json.dumps(MUTANTS))
    session.run("python", str(ROOT / "tools" / "mutants.py"), "--plan", str(plan), "--tree", str(tmp / "tree"),
                "--out", str(tmp / "report"), "--sample", str(MUTANTS_SAMPLE), *session.posargs)
