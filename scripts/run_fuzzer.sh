#!/usr/bin/env bash
# Runs the parser fuzzer for N seconds, seeded with the golden IR cases.
#   scripts/run_fuzzer.sh build-fuzz/llga_parse_fuzzer 600
set -euo pipefail
fuzzer=$1
seconds=${2:-600}
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=$(dirname "$fuzzer")/corpus
mkdir -p "$corpus"
# Seeds: every case of every golden file, one file each.
/usr/bin/python3 - "$root/tests/ir" "$corpus" <<'PY'
import pathlib, sys
src, dst = map(pathlib.Path, sys.argv[1:])
for f in sorted(src.glob("*.ir")):
    for i, case in enumerate(f.read_bytes().split(b"\n# -----")):
        (dst / f"seed-{f.stem}-{i}.ir").write_bytes(case)
PY
log=$(dirname "$fuzzer")/fuzz.log
set +e
"$fuzzer" "$corpus" -dict="$root/src/fuzz/ir.dict" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=4096 -max_len=16384 -print_final_stats=1 -artifact_prefix="$(dirname "$fuzzer")/" >"$log" 2>&1
status=$?
set -e
grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$log" || true
if [[ $status -ne 0 ]]; then
  echo "fuzzer failed (exit $status); last lines of $log:" >&2
  tail -40 "$log" >&2
  exit 1
fi
echo "fuzzer: no crash, hang or sanitizer report in ${seconds}s"
