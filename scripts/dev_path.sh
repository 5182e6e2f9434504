#!/usr/bin/env bash
# Makes this checkout's llga importable from any directory and any Jupyter
# kernel of Debian's Python: a .pth file in the system site directory
# (/usr/local/lib/python3.X/dist-packages) naming the checkout. Rewritten on
# every call, so it follows the checkout that last ran it; `make uninstall`
# removes it. An llga installed by `make install` (pip) comes first on sys.path
# and wins: this script says so.
set -euo pipefail
py=${1:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/.." && pwd)
site=$("$py" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
pth="$site/llga-checkout.pth"
sudo=""
if [[ "$(id -u)" -ne 0 ]]; then sudo="sudo"; fi
if [[ "${2:-}" == "--remove" ]]; then
  $sudo rm -f "$pth"
  exit 0
fi
$sudo mkdir -p "$site"
if [[ ! -f "$pth" || "$(cat "$pth")" != "$root" ]]; then
  echo "$root" | $sudo tee "$pth" >/dev/null
fi
where=$(cd / && env -u PYTHONPATH "$py" -c 'import llga, os; print(os.path.dirname(os.path.dirname(os.path.abspath(llga.__file__))))')
if [[ "$where" != "$root" ]]; then
  echo "dev_path: note: 'import llga' finds $where first (an installed copy), not this checkout ($root)" >&2
fi
