#!/usr/bin/env bash
# Runs a fuzzer for N seconds, seeded for its input kind:
#   the parser fuzzer with every case of the golden IR files,
#   the model-file fuzzer with tests/fuzz/model_seeds/*.llga (scripts/make_model_seeds.py).
#   scripts/run_fuzzer.sh build-fuzz/llga_parse_fuzzer 600
set -euo pipefail
fuzzer=$1
seconds=${2:-600}
root=$(cd "$(dirname "$0")/.." && pwd)
name=$(basename "$fuzzer")
corpus=$(dirname "$fuzzer")/corpus-$name
mkdir -p "$corpus"
case "$name" in
  llga_model_file_fuzzer)
    cp "$root"/tests/fuzz/model_seeds/*.llga "$corpus"/
    args=(-max_len=131072)
    ;;
  *)
    # Seeds: every case of every golden file, one file each.
    /usr/bin/python3 - "$root/tests/ir" "$corpus" <<'PY'
import pathlib, sys
src, dst = map(pathlib.Path, sys.argv[1:])
for f in sorted(src.glob("*.ir")):
    for i, case in enumerate(f.read_bytes().split(b"\n# -----")):
        (dst / f"seed-{f.stem}-{i}.ir").write_bytes(case)
PY
    args=(-dict="$root/src/fuzz/ir.dict" -max_len=16384)
    ;;
esac
log=$(dirname "$fuzzer")/fuzz-$name.log
set +e
"$fuzzer" "$corpus" "${args[@]}" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$(dirname "$fuzzer")/$name-" >"$log" 2>&1
status=$?
set -e
grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$log" || true
if [[ $status -ne 0 ]]; then
  echo "$name failed (exit $status); last lines of $log:" >&2
  tail -40 "$log" >&2
  exit 1
fi
echo "$name: no crash, hang or sanitizer report in ${seconds}s"
