#!/usr/bin/env bash
# Run upstream TileLang's own CPU/LLVM test files, unchanged, against the installed project.
#   tools/upstream_tests.sh /path/to/tilelang-checkout [pytest args...]
# The checkout is upstream's repository (tile-ai/tilelang); its files are read, never copied
# here. Tests run from a copy of testing/python/{cpu,llvm} in a temporary folder, so that
# nothing of upstream's package shadows the installed `tilelang`.
set -euo pipefail
upstream=${1:?usage: tools/upstream_tests.sh /path/to/tilelang-checkout [pytest args...]}
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$upstream/testing/python/cpu" "$upstream/testing/python/llvm" "$work/"
cd "$work"
python3 -c "import tilelang, sys; print('tilelang from', tilelang.__file__, file=sys.stderr)"
exec python3 -m pytest -q -ra -p no:cacheprovider cpu llvm "$@"
