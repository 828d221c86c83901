#!/usr/bin/env bash
# Run on the lent GPU host after `source .gpu/setup-host.sh` (see ../shared/gpu/README.md):
# GPU tests of every distribution plus the GPU benchmarks; logs and JSON go to $OUT.
set -uo pipefail
out=${OUT:-/tmp/tl-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TILELANG_CACHE_DIR=/tmp/tl-cache
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, tilelang; print('torch', torch.__version__, 'tilelang', tilelang.__version__, tilelang.__file__)"
  python3 -m tilelang backends list
} 2>&1 | tee "$out/env.log"
python3 -m tilelang backends list --json > "$out/backends.json" 2>&1
tests=()
for d in tilelang-*/tests; do tests+=("$d"); done
timeout 420 python3 -m pytest -q -ra -p no:cacheprovider -m "gpu or not slow" "${tests[@]}" "$@" 2>&1 | tee "$out/pytest.log" | tail -40
timeout 120 python3 benchmarks/elementwise.py --json "$out/elementwise.json" > "$out/elementwise.log" 2>&1
tail -5 "$out/elementwise.log"
timeout 120 python3 benchmarks/launch_overhead.py --json "$out/launch_overhead.json" > "$out/launch_overhead.log" 2>&1
cat "$out/launch_overhead.log"
