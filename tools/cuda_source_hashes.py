"""Hash the CUDA source the CUDA backend generates, to show that a refactoring of shared
passes leaves it byte-identical.

    python tools/cuda_source_hashes.py record before.json [pytest args...]
    python tools/cuda_source_hashes.py compare before.json after.json

``record`` lowers the testing kit's kernels and the examples for sm_80 and sm_90, then runs
tilelang-cuda's tests in this process (default: every test file, GPU tests deselected,
``-n 0``) and records the sha256 of every CUDA source the backend's codegen produced, keyed
by the test (or kit kernel) and its position within it. ``compare`` lists what differs and
exits 1 when anything does.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHES = ("sm_80", "sm_90")


def _kit_kernels() -> dict[str, object]:
    from tilelang.testing import kernels as kit

    return {
        "elementwise_add": lambda: kit.elementwise_add(1024, 256),
        "elementwise_add_f16": lambda: kit.elementwise_add(1024, 256, dtype="float16"),
        "row_softmax_sum": lambda: kit.row_softmax_sum(64),
        "tiled_matmul": lambda: kit.tiled_matmul(128, 128, 64),
        "saxpy": lambda: kit.saxpy(1000),
        "split_k_gemm": lambda: kit.split_k_gemm(256, 256, 256, 4),
        "tile_gemm": lambda: kit.tile_gemm(256, 256, 256, bM=64, bN=64, bK=32),
        "tile_gemm_tt": lambda: kit.tile_gemm(128, 128, 128, trans_a=True, trans_b=True),
        "flash_attention": lambda: kit.flash_attention(1, 2, 256, 64),
        "rms_norm_rows": lambda: kit.rms_norm_rows(64, 256, blk_m=1),
        "masked_block_sum": lambda: kit.masked_block_sum(),
        "split_row_sum": lambda: kit.split_row_sum(),
        "flat_views": lambda: kit.flat_views(),
        "global_layout_accumulate": lambda: kit.global_layout_pair()[0],
        "global_layout_unpack": lambda: kit.global_layout_pair()[1],
    }


class _Recorder:
    """Wraps the CUDA codegen's build so every generated source is hashed under the
    current key (the running test, or a kit kernel's name)."""

    def __init__(self) -> None:
        self.key = "<outside>"
        self.hashes: dict[str, str] = {}
        self.counts: dict[str, int] = defaultdict(int)

    def install(self) -> None:
        from tilelang.cuda import codegen

        original = codegen._build_cuda

        def recording(mod, target):
            module = original(mod, target)
            n = self.counts[self.key]
            self.counts[self.key] += 1
            source = str(module.inspect_source())
            self.hashes[f"{self.key}#{n}"] = hashlib.sha256(source.encode()).hexdigest()
            return module

        codegen._build_cuda = recording

    # pytest hooks: key the sources by test id
    def pytest_runtest_setup(self, item) -> None:
        self.key = item.nodeid

    def pytest_runtest_teardown(self, item) -> None:
        self.key = "<outside>"


def record(out: Path, pytest_args: list[str]) -> int:
    import pytest
    import tilelang

    recorder = _Recorder()
    recorder.install()
    for name, make in _kit_kernels().items():
        for arch in ARCHES:
            recorder.key = f"kit:{name}:{arch}"
            try:
                tilelang.lower(make(), target={"kind": "cuda", "arch": arch})
            except Exception as err:  # noqa: BLE001 - a kernel that fails to lower is recorded as such
                recorder.hashes[recorder.key] = f"error: {type(err).__name__}: {str(err)[:200]}"
    args = pytest_args or [str(ROOT / "tilelang-cuda" / "tests"), "-m", "not gpu", "-n", "0", "-q",
                           "-p", "no:cacheprovider"]
    status = pytest.main(args, plugins=[recorder])
    out.write_text(json.dumps(dict(sorted(recorder.hashes.items())), indent=1) + "\n")
    print(f"{len(recorder.hashes)} sources hashed into {out} (pytest exit {int(status)})")
    return int(status)


def compare(before: Path, after: Path) -> int:
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    differ = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
    only_a, only_b = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    for title, keys in (("differ", differ), (f"only in {before}", only_a), (f"only in {after}", only_b)):
        for key in keys:
            print(f"{title}: {key}")
    same = len(a.keys() & b.keys()) - len(differ)
    print(f"{same} identical, {len(differ)} differ, {len(only_a)} + {len(only_b)} unmatched")
    return 1 if differ or only_a or only_b else 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "record":
        return record(Path(argv[1]), argv[2:])
    if len(argv) == 3 and argv[0] == "compare":
        return compare(Path(argv[1]), Path(argv[2]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
