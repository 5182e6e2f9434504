#!/usr/bin/env bash
# make test-fresh: proves the README's two commands work on a fresh Debian 12.
#
#   scripts/test_fresh.sh [--only-demo] [--keep] [--rebuild]
#
# Builds a bare Debian 12 (bookworm, mmdebstrap --variant=minbase: essential
# packages and apt, nothing else) in ${FRESH_ROOT:-/var/tmp/llga-fresh}, clones
# this repository's committed HEAD into it as /root/src/main (with ../shared
# beside it as /root/src/shared, as CI has it), chroots in and runs, as root in
# a clean environment,
#
#   cd /root/src/main && make demo && CI=true make test
#
# then prints the time of each phase and a final PASS/FAIL line; the exit
# status is non-zero on failure. Everything goes to ${FRESH_ROOT}.log as well.
#
#   --only-demo  skip `make test` (a quicker check)
#   --keep       keep the root directory after the run, for inspection
#   --rebuild    make a new bare root tarball (${FRESH_ROOT}.tar) even if one is cached
#
# Environment: FRESH_ROOT (the root directory; the tarball and the log sit
# beside it), FRESH_PREREQS (packages a user installs by hand before the
# README's commands; default "make", which a fresh Debian 12 does not have).
#
# Uncommitted changes are NOT tested: the chroot gets a clone of HEAD.
#
# Mounts (proc, sysfs, a tmpfs /dev with the usual device nodes, devpts,
# /dev/shm) are made private, undone on any exit (error, Ctrl-C, TERM), and the
# root is only removed once findmnt shows nothing mounted at or below it. There
# are no bind mounts of host directories, and the removal does not cross file
# systems (rm --one-file-system), so it can never reach into the host's /dev
# or /sys.
set -euo pipefail
umask 022

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

keep=0 rebuild=0 only_demo=0
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    --rebuild) rebuild=1 ;;
    --only-demo) only_demo=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "test_fresh: unknown option '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done

die() { echo "test_fresh: $*" >&2; exit 1; }

[[ "$(id -u)" -eq 0 ]] || die "needs root (mmdebstrap, mount and chroot): run it as root or with sudo"

repo=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
root=$(realpath -m -- "${FRESH_ROOT:-/var/tmp/llga-fresh}")
tarball=$root.tar
log=$root.log
read -r -a prereqs <<<"${FRESH_PREREQS-make}"
suite=bookworm
mirrors=(
  "deb http://deb.debian.org/debian $suite main"
  "deb http://deb.debian.org/debian $suite-updates main"
  "deb http://deb.debian.org/debian-security $suite-security main"
)
chroot_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# The root is removed recursively: refuse anything that could be a system
# directory, the repository, or a parent of it.
[[ "$root" =~ ^/[A-Za-z0-9._/+-]+$ ]] || die "FRESH_ROOT must be an absolute path of plain characters: '$root'"
case "$root" in
  /|/bin|/boot|/dev|/etc|/home|/lib*|/media|/mnt|/opt|/proc|/root|/run|/sbin|/srv|/sys|/tmp|/usr|/var|/var/tmp|/var/lib|/work)
    die "FRESH_ROOT='$root' is a system directory" ;;
esac
(( $(tr -cd / <<<"$root" | wc -c) >= 2 )) || die "FRESH_ROOT='$root' is too close to /: use a directory at least two levels down"
case "$repo/" in "$root"/*) die "FRESH_ROOT='$root' contains the repository" ;; esac
case "$root/" in "$repo"/*) die "FRESH_ROOT='$root' is inside the repository" ;; esac
mkdir -p "$(dirname "$root")"

# One run at a time per root: the lock is held on the log's file descriptor
# (by this script only: the chroot, tee and the line prefixer get no copy).
exec 9>>"$log"
flock -n 9 || die "another test_fresh run is using $root (lock on $log)"
: >"$log"
# Everything to the terminal and the log. tee ignores INT/TERM so that the
# cleanup after a Ctrl-C is still shown and logged.
exec > >(trap '' INT TERM; exec tee -a "$log" 9>&-) 2>&1
tee_pid=$!

t_start=$(date +%s)
phases=()       # "name seconds" of each phase that ran
failed_phase=""
tested=""       # the commit cloned into the root
cur_phase="" cur_t0=0
status_line=""

stamp() { date '+%H:%M:%S'; }
note() { echo "[$(stamp)] test_fresh: $*"; }

# Prefixes each line with the time since the phase began.
prefix_lines() {
  local t0=$1 line
  while IFS= read -r line || [[ -n "$line" ]]; do
    printf '  [+%4ds] %s\n' $(( $(date +%s) - t0 )) "$line"
  done
}

# Mount points at or below the root, deepest first.
mounts_below_root() {
  findmnt -rn -o TARGET | awk -v r="$root" '$0 == r || index($0, r "/") == 1' | sort -r
}

# Processes whose root directory is the chroot (started by this run, or left
# by an earlier run that was killed).
procs_in_root() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    if [[ "$r" == "$root" || "$r" == "$root"/* ]]; then echo "${p#/proc/}"; fi
  done
}

kill_procs_in_root() {
  local pids
  pids=$(procs_in_root)
  [[ -n "$pids" ]] || return 0
  note "stopping processes left in the root: $(tr '\n' ' ' <<<"$pids")"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.5
    pids=$(procs_in_root)
    [[ -n "$pids" ]] || return 0
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
  sleep 0.5
}

# Unmounts everything at or below the root; returns non-zero if anything is
# still mounted there afterwards.
unmount_all() {
  local m left
  kill_procs_in_root
  while IFS= read -r m; do
    [[ -n "$m" ]] || continue
    umount "$m" 2>/dev/null || { note "umount $m busy: detaching it (umount -l)"; umount -l "$m" || true; }
  done < <(mounts_below_root)
  left=$(mounts_below_root)
  if [[ -n "$left" ]]; then
    note "ERROR: still mounted below $root:"; echo "$left"
    return 1
  fi
  return 0
}

# Removes the root directory, only when nothing is mounted at or below it.
remove_root() {
  [[ -e "$root" ]] || return 0
  unmount_all || { note "NOT removing $root: something is still mounted below it"; return 1; }
  rm -rf --one-file-system -- "$root"
}

mounted=0
cleanup() {
  local rc=$?
  trap '' INT TERM PIPE
  set +e
  rm -f -- "$tarball.partial"
  if [[ -n "$cur_phase" ]]; then  # interrupted in the middle of a phase
    phases+=("$cur_phase (unfinished) $(( $(date +%s) - cur_t0 ))")
    failed_phase=${failed_phase:-$cur_phase}
  fi
  if ((mounted)) || [[ -n "$(mounts_below_root 2>/dev/null)" ]]; then
    note "unmounting"
    if unmount_all; then
      note "nothing mounted below $root (findmnt)"
    else
      rc=1
    fi
  fi
  if [[ -d "$root" ]]; then
    if ((keep)); then
      note "kept $root (--keep); chroot into it with: chroot $root /bin/bash  (mount proc etc. yourself)"
    else
      remove_root && note "removed $root" || rc=1
    fi
  fi
  echo
  echo "test_fresh: timings"
  local p
  for p in "${phases[@]}"; do
    printf '  %-50s %6ss\n' "${p% *}" "${p##* }"
    if [[ "$p" == "make demo "* ]]; then  # the time bootstrap.sh's apt-get took, from its line in the log
      local b
      b=$(grep -m1 -o '\[+ *[0-9]*s\] bootstrap: done' "$log" | tr -dc 0-9)
      [[ -z "$b" ]] || printf '  %-50s %6ss\n' "  of which apt (bootstrap.sh)" "$b"
    fi
  done
  printf '  %-50s %6ss\n' "total" $(( $(date +%s) - t_start ))
  if ((rc == 0)); then
    echo "test_fresh: PASS: $status_line on a fresh Debian 12 (minbase) at $tested; log: $log"
  else
    local where=""
    [[ -z "$failed_phase" ]] || where=" in phase [$failed_phase]"
    echo "test_fresh: FAIL$where (exit $rc); log: $log"
  fi
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null
  exit "$rc"
}
trap cleanup EXIT
trap 'note "interrupted"; exit 130' INT
trap 'note "terminated"; exit 143' TERM

# Runs one phase: times it and records a failure.
phase() {
  local name=$1 t0 rc
  shift
  note "phase: $name"
  t0=$(date +%s)
  cur_phase=$name cur_t0=$t0
  set +e
  "$@"
  rc=$?
  set -e
  cur_phase=""
  phases+=("$name $(( $(date +%s) - t0 ))")
  if ((rc != 0)); then
    failed_phase=$name
    note "phase '$name' failed (exit $rc)"
    exit "$rc"
  fi
}

# Runs a command in the chroot, in a clean environment, without standard input.
# It runs in the background and is waited for, so that INT or TERM sent to this
# script alone is acted on at once (the cleanup stops what runs in the root).
in_root() {
  local t0 rc
  t0=$(date +%s)
  echo "  # chroot $root: $*"
  (
    set +e
    env -i HOME=/root PATH="$chroot_path" LANG=C.UTF-8 TERM=dumb NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
      chroot "$root" /bin/bash -c "set -eo pipefail; $*" </dev/null 9>&- 2>&1 | prefix_lines "$t0"
    exit "${PIPESTATUS[0]}"
  ) 9>&- &
  set +e
  wait "$!"
  rc=$?
  set -e
  return "$rc"
}

# --- host: mmdebstrap --------------------------------------------------------
note "repository $repo at $(git -C "$repo" log -1 --format='%h %cd' --date=iso)"
dirty=$(git -C "$repo" status --porcelain --untracked-files=no | wc -l)
if ((dirty)); then
  note "NOTE: $dirty uncommitted change(s) in $repo are NOT tested: the fresh root gets a clone of the committed HEAD"
fi
phase "host: scripts/bootstrap.sh fresh" "$repo/scripts/bootstrap.sh" fresh
command -v mmdebstrap >/dev/null || die "mmdebstrap is still missing after scripts/bootstrap.sh fresh"

# --- the bare root -----------------------------------------------------------
make_tarball() {
  rm -f -- "$tarball.partial"
  if [[ -n "$cur_phase" ]]; then  # interrupted in the middle of a phase
    phases+=("$cur_phase (unfinished) $(( $(date +%s) - cur_t0 ))")
    failed_phase=${failed_phase:-$cur_phase}
  fi
  mmdebstrap --mode=root --variant=minbase --format=tar "$suite" "$tarball.partial" "${mirrors[@]}"
  mv -f -- "$tarball.partial" "$tarball"
}
if ((rebuild)) || [[ ! -s "$tarball" ]]; then
  phase "bare root: mmdebstrap minbase" make_tarball
else
  note "reusing the bare root $tarball (from $(date -r "$tarball" '+%Y-%m-%d %H:%M'); --rebuild makes a new one)"
fi

# A leftover root (from --keep, or a run that was killed) goes first.
if [[ -e "$root" ]]; then
  note "removing the previous root $root"
  remove_root || die "could not remove the previous root $root"
fi

extract_root() {
  mkdir -- "$root"
  tar -C "$root" --numeric-owner -xpf "$tarball"
}
phase "bare root: extract" extract_root

# --- the repository, as CI has it ---------------------------------------------
clone_repo() {
  local head
  head=$(git -C "$repo" rev-parse HEAD)
  tested=${head:0:12}
  mkdir -p "$root/root/src"
  git clone --quiet --no-hardlinks -- "$repo" "$root/root/src/main"
  git -C "$root/root/src/main" -c advice.detachedHead=false checkout --quiet --detach "$head"
  echo "  main: $(git -C "$root/root/src/main" log -1 --format='%h %s' | cut -c1-100)"
  if [[ -d "$repo/../shared" ]]; then
    cp -a -- "$repo/../shared" "$root/root/src/shared"
    echo "  shared: copied $(realpath "$repo/../shared") to /root/src/shared"
  else
    echo "  shared: none beside the repository"
  fi
}
phase "clone HEAD into the root" clone_repo

# --- mounts ------------------------------------------------------------------
do_mount() {  # do_mount TARGET mount-args...
  local target=$1
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  mount --make-private "$target"
}
mount_root() {
  mounted=1
  do_mount "$root/proc" -t proc -o nosuid,nodev,noexec proc
  do_mount "$root/sys" -t sysfs -o ro,nosuid,nodev,noexec sysfs
  # A tmpfs /dev of its own (no bind of the host's /dev) with the usual nodes.
  do_mount "$root/dev" -t tmpfs -o mode=755,nosuid,size=64m llga-fresh-dev
  local spec name
  for spec in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
    read -r name maj min <<<"$spec"
    mknod -m 666 "$root/dev/$name" c "$maj" "$min"
  done
  ln -s /proc/self/fd "$root/dev/fd"
  ln -s /proc/self/fd/0 "$root/dev/stdin"
  ln -s /proc/self/fd/1 "$root/dev/stdout"
  ln -s /proc/self/fd/2 "$root/dev/stderr"
  ln -s pts/ptmx "$root/dev/ptmx"
  do_mount "$root/dev/pts" -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5,nosuid,noexec devpts
  do_mount "$root/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev,size=2g llga-fresh-shm  # chromium needs it
  # Name resolution for apt; and no daemons started by package scripts.
  rm -f "$root/etc/resolv.conf"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  # This workplace reaches the npm registry through a TLS proxy whose CA its
  # machines carry in /usr/local/share/ca-certificates: a fresh machine here
  # has them too, so the root gets them (ca-certificates adds them to the
  # system bundle when bootstrap installs it); nothing of the project's.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  fi
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  findmnt -rn -o TARGET,FSTYPE,PROPAGATION | awk -v r="$root" 'index($1, r "/") == 1 { print "  " $0 }'
}
phase "mount proc, sys, dev, dev/pts, dev/shm" mount_root

# --- inside --------------------------------------------------------------------
user_prereqs() {
  local missing=() p
  for p in "${prereqs[@]}"; do
    # shellcheck disable=SC2016
    chroot "$root" dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -q '^installed$' || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    echo "  already there: ${prereqs[*]}"
    return 0
  fi
  note "NOTE: a fresh Debian 12 has no ${missing[*]}: the README's commands need 'apt-get install ${missing[*]}' first"
  in_root "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq --no-install-recommends ${missing[*]} >/dev/null && echo installed ${missing[*]}"
}
if ((${#prereqs[@]})); then
  phase "user prerequisites (${prereqs[*]})" user_prereqs
fi

phase "make demo (bootstrap, build, demo)" in_root "cd /root/src/main && make demo"
status_line="make demo"
if ((only_demo)); then
  note "--only-demo: skipping make test"
else
  phase "CI=true make test" in_root "cd /root/src/main && CI=true make test"
  status_line="make demo and make test"
fi
