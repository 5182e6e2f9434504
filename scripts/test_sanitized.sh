#!/bin/sh
# The Python tests through a sanitizer build of the extension, on the real
# Python path: /usr/bin/python3 is not instrumented, so the sanitizer's
# runtime is preloaded into it (with libstdc++, which the runtime's
# __cxa_throw interceptor must find at start-up), and llga loads the
# instrumented extension named by LLGA_EXTENSION (llga/__init__.py).
#
#   scripts/test_sanitized.sh address build-asan /usr/bin/python3 tests/py/test_inputs.py ...
#   scripts/test_sanitized.sh thread  build-tsan /usr/bin/python3 tests/py/test_stress.py -k threads
#
# Every report goes to BUILD/sanitizer-logs/ (pytest captures the tests'
# stderr, and a report that aborts the process would otherwise be lost); any
# report fails the run and is printed.
set -eu
san=$1 build=$2 py=$3
shift 3
ext=$(ls "$build"/_llga*.so 2>/dev/null | head -n 1)
[ -n "$ext" ] || { echo "no extension module in $build (build its _llga target first)" >&2; exit 2; }
logs=$build/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
stdcxx=$(gcc -print-file-name=libstdc++.so)
case $san in
  address)
    # Leaks are not checked: CPython and the libraries it loads keep their
    # allocations until exit. UBSan aborts at the first finding (-fno-sanitize-recover).
    preload="$(gcc -print-file-name=libasan.so) $stdcxx"
    export ASAN_OPTIONS="detect_leaks=0:log_path=$logs/asan"
    export UBSAN_OPTIONS="print_stacktrace=1:log_path=$logs/ubsan"
    ;;
  thread)
    # OpenMP teams are one thread: libgomp is not instrumented, so TSan cannot
    # see its barriers and would report every parallel loop. The races looked
    # for here are between callers' threads (caches, arenas, specializations),
    # which TSan sees through the pthread calls it intercepts everywhere.
    preload="$(gcc -print-file-name=libtsan.so) $stdcxx"
    export OMP_NUM_THREADS=1
    export TSAN_OPTIONS="second_deadlock_stack=1:report_signal_unsafe=0:log_path=$logs/tsan:suppressions=$(dirname "$0")/tsan.supp"
    ;;
  *) echo "sanitizer: address or thread, not $san" >&2; exit 2 ;;
esac
status=0
LD_PRELOAD="$preload" LLGA_EXTENSION="$(realpath "$ext")" LLGA_SANITIZER=$san \
  "$py" -m pytest -q -p no:cacheprovider "$@" || status=$?
if [ -n "$(ls "$logs")" ]; then
  for f in "$logs"/*; do echo "==== $f"; cat "$f"; done
  echo "$san sanitizer: $(ls "$logs" | wc -l) report file(s) above" >&2
  exit 1
fi
exit $status
