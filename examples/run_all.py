"""The demo: compile and run every example on the best available backend, checking each
result against numpy. Usage: python examples/run_all.py"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

EXAMPLES = ["elementwise_add", "softmax", "rmsnorm", "gemm", "flash_attention"]


def main() -> int:
    import tilelang  # noqa: F401 - loads the plugins before timing starts

    failures = 0
    for name in EXAMPLES:
        start = time.perf_counter()
        try:
            described = importlib.import_module(name).run()
        except Exception as err:  # report every example, then fail at the end
            failures += 1
            print(f"[FAIL] {name}: {type(err).__name__}: {err}", flush=True)
            continue
        print(f"[ OK ] {name:16s} {time.perf_counter() - start:6.2f}s  {described}", flush=True)
    print("all examples passed" if not failures else f"{failures} example(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
