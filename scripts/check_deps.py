#!/usr/bin/env python3
"""Every system file the build and the tests use comes from a package scripts/bootstrap.sh installs.

"Installs" means: a package `scripts/bootstrap.sh --list` prints, or one of the installed packages that
those need (Depends and Pre-Depends, transitively; of alternatives `a | b` the first one installed; a
virtual package through the installed packages that Provide it), or Debian's base system (Priority
required or important, Essential: yes; --minbase: not important) and what that needs.

The files checked are the ones actually used, gathered from the build directory:
  cmake    absolute paths in DIR/CMakeCache.txt that exist (compilers, programs, libraries, config dirs)
  headers  the headers the compiler read (`ninja -t deps`)
  link     the libraries named on link lines (LINK_LIBRARIES in DIR/build.ninja)
  ldd      the shared libraries that the binaries built in DIR and llga/_llga*.so load
  modules  the Python modules the tests imported: DIR/test-modules.txt (or --modules FILE), if there,
           one path a line (`LLGA_RECORD_MODULES=DIR/test-modules.txt python3 -m pytest tests/py`
           writes it, as make test-py does; a .pyc counts as its .py)
Files in the repo or in DIR are not system files. A path is looked up as given, along its chain of
symlinks (/usr/bin/c++ -> /etc/alternatives/c++ -> ... -> x86_64-linux-gnu-g++-12: each link that a
package owns must be covered, so libOpenCL.so -> libOpenCL.so.1.0.0 needs both packages, and the file
it ends at must be owned), and with /lib <-> /usr/lib swapped (Debian's merged /usr: dpkg knows some
files under /lib). A file owned by no package fails too, unless ALLOW below names it.

Exit 0: all covered. 1: some file is not (each is listed with its package and a hint). 2: usage error.
`--without PKG` pretends bootstrap does not list PKG: `--without ocl-icd-opencl-dev` must fail.
"""

import argparse
import functools
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DPKG_INFO = "/var/lib/dpkg/info"
DIVERSIONS = "/var/lib/dpkg/diversions"

# Used but owned by no package, and fine on any Debian machine. Keep this short.
ALLOW = (
    "/etc/ld.so.cache",  # written by ldconfig (libc-bin's trigger), read by every dynamic load
    "/proc/", "/sys/", "/dev/",  # the kernel's, not files on disk
)
# CMake cache entries that name where things would go or where to look, not a file that is used.
# Also the binary tools CMake records for every compiler but this build never runs: it links through
# the compiler driver (not CMAKE_LINKER), does no IPO (CMAKE_<LANG>_COMPILER_AR/RANLIB) and strips,
# dumps or converts nothing. (CMAKE_AR and CMAKE_RANLIB make the static libraries: those stay checked.)
CMAKE_SKIP = re.compile(r"^(CMAKE_INSTALL_\w*|CMAKE_FIND_PACKAGE_REDIRECTS_DIR|\w*_BINARY_DIR|\w*_SOURCE_DIR"
                        r"|CMAKE_(LINKER|NM|OBJCOPY|OBJDUMP|READELF|STRIP|ADDR2LINE|DLLTOOL|MT|\w+_COMPILER_(AR|RANLIB)))$")
# A find module's result that is a search root (OpenCL_INCLUDE_DIR=/usr/include) proves nothing by
# itself: check the file the module looked for there instead.
CMAKE_FOUND_IN = {"OpenCL_INCLUDE_DIR": "CL/cl.h"}
MERGED_USR = ("/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")


def inside(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


# --- what dpkg knows ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def owner_index():
    """path -> set of packages whose file lists name it (from /var/lib/dpkg/info/*.list, diversions applied)."""
    index = {}
    for lst in glob.glob(os.path.join(DPKG_INFO, "*.list")):
        pkg = os.path.basename(lst)[:-len(".list")].split(":")[0]
        with open(lst, encoding="utf-8", errors="surrogateescape") as fh:
            for line in fh:
                path = line.rstrip("\n")
                if path == "/.":
                    path = "/"
                index.setdefault(path, set()).add(pkg)
    try:
        with open(DIVERSIONS, encoding="utf-8", errors="surrogateescape") as fh:
            lines = fh.read().splitlines()
    except OSError:
        lines = []
    for i in range(0, len(lines) - 2, 3):
        orig, moved, by = lines[i:i + 3]
        others = index.get(orig, set()) - {by}
        if others:  # their file now lives at `moved`; `orig` is the diverting package's (or local)
            index.setdefault(moved, set()).update(others)
            index[orig] = index[orig] & {by}
    return index


@functools.lru_cache(maxsize=None)
def package_db():
    """Installed packages: name -> (priority, essential, depends, pre-depends); and virtual name -> providers."""
    fmt = "${Package}\t${db:Status-Status}\t${Priority}\t${Essential}\t${Depends}\t${Pre-Depends}\t${Provides}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f=" + fmt], capture_output=True, text=True, check=True).stdout
    pkgs, provides = {}, {}
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) != 7 or f[1] != "installed":
            continue
        name, _, prio, ess, dep, pre, prov = f
        pkgs[name] = (prio, ess == "yes", dep, pre)
        for alt in relations(prov):
            provides.setdefault(alt[0], set()).add(name)
    return pkgs, provides


def relations(field):
    """'a (>= 1) | b:any, c' -> [['a', 'b'], ['c']]: names only."""
    out = []
    for group in field.split(","):
        names = [m.group(1) for alt in group.split("|")
                 if (m := re.match(r"\s*([a-z0-9][a-z0-9+.-]*)", alt))]
        if names:
            out.append(names)
    return out


def installed_as(name, pkgs, provides):
    """The installed packages that satisfy a dependency on `name` (itself, or what Provides it)."""
    if name in pkgs:
        return {name}
    return provides.get(name, set())


def closure(seeds, pkgs, provides):
    allowed, todo = set(), list(seeds)
    while todo:
        p = todo.pop()
        if p in allowed or p not in pkgs:
            continue
        allowed.add(p)
        _, _, dep, pre = pkgs[p]
        for alts in relations(dep) + relations(pre):
            for alt in alts:  # the first alternative that is installed
                found = installed_as(alt, pkgs, provides)
                if found:
                    todo.extend(found)
                    break
    return allowed


def bootstrap_list(groups):
    script = os.path.join(ROOT, "scripts", "bootstrap.sh")
    with open(script, encoding="utf-8") as fh:
        if "--list" not in fh.read():  # an older bootstrap.sh would install instead of listing
            raise SystemExit("check_deps: scripts/bootstrap.sh has no --list")
    r = subprocess.run(["bash", script, "--list", *groups], capture_output=True, text=True)
    listed = [p for p in r.stdout.split() if p]
    if r.returncode != 0 or not listed:
        raise SystemExit(f"check_deps: scripts/bootstrap.sh --list {' '.join(groups)} failed: {r.stderr.strip()}")
    return listed


def allowed_packages(listed, without=(), minbase=False):
    """(allowed set, the listed packages that nothing installed satisfies). The base system is Essential
    and Priority required, and important too unless `minbase` (mmdebstrap --variant=minbase, which
    scripts/test_fresh.sh starts from, has Essential, required and apt)."""
    pkgs, provides = package_db()
    seeds, missing = set(), []
    for name in listed:
        if name in without:
            continue
        found = installed_as(name, pkgs, provides)
        if not found:
            missing.append(name)
        seeds |= found
    prios = ("required",) if minbase else ("required", "important")
    base = {p for p, (prio, ess, _, _) in pkgs.items() if ess or prio in prios} | ({"apt"} & set(pkgs))
    return closure(seeds | base, pkgs, provides), missing


# --- what the build and the tests used ---------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def collect(build, modules_file):
    """path -> sorted list of where it was seen ('cmake:VAR', 'headers', 'link', 'ldd:BINARY', 'modules')."""
    seen = {}

    def add(path, source):
        seen.setdefault(path, set()).add(source)

    # 1. CMakeCache.txt
    with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            m = re.match(r"^([A-Za-z0-9_.+-]+):[A-Z]+=(.*)$", line.rstrip("\n"))
            if not m or CMAKE_SKIP.match(m.group(1)):
                continue
            for value in m.group(2).split(";"):
                if m.group(1) in CMAKE_FOUND_IN:
                    value = os.path.join(value, CMAKE_FOUND_IN[m.group(1)])
                if value.startswith("/") and "NOTFOUND" not in value and os.path.exists(value):
                    add(value, "cmake:" + m.group(1))

    # 2. headers (ninja's deps log) and 3. link lines (build.ninja)
    if os.path.exists(os.path.join(build, "build.ninja")):
        r = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"check_deps: ninja -C {build} -t deps failed: {r.stderr.strip()}")
        for line in r.stdout.splitlines():
            path = os.path.normpath(os.path.join(build, line.strip()))
            if line.startswith(" ") and line.strip() and os.path.exists(path):
                add(path, "headers")
        with open(os.path.join(build, "build.ninja"), encoding="utf-8", errors="surrogateescape") as fh:
            for line in fh:
                if line.strip().startswith("LINK_LIBRARIES ="):
                    for word in line.split("=", 1)[1].split():
                        if word.startswith("/") and os.path.exists(word):
                            add(word, "link")

    # 4. ldd of what was built, and of the Python extension in llga/
    binaries = glob.glob(os.path.join(ROOT, "llga", "_llga*.so"))
    for dirpath, dirnames, filenames in os.walk(build):
        dirnames[:] = [d for d in dirnames if d != "CMakeFiles"]  # CMake's own probe binaries
        binaries += [os.path.join(dirpath, f) for f in filenames if is_elf_binary(os.path.join(dirpath, f))]
    for binary in sorted(binaries):
        label = "ldd:" + os.path.basename(binary)
        r = subprocess.run(["ldd", binary], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            m = re.match(r"^\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line) or \
                re.match(r"^\s*(/\S+) \(0x[0-9a-f]+\)$", line)
            if not m:
                continue
            target = m.group(2) if m.lastindex == 2 else m.group(1)
            if target == "not found":
                add("not found: " + m.group(1), label)
            elif target.startswith("/"):
                add(target, label)

    # 5. Python modules the tests imported
    if modules_file and os.path.exists(modules_file):
        with open(modules_file, encoding="utf-8", errors="surrogateescape") as fh:
            for line in fh:
                path = source_of(line.strip())
                if path.startswith("/") and os.path.exists(path):
                    add(path, "modules")

    return {p: sorted(s) for p, s in seen.items() if not (in_tree(p, build))}


def in_tree(path, build):
    if path.startswith("not found: "):
        return False
    for p in {path, os.path.realpath(path)}:
        if inside(p, ROOT) or inside(p, build):
            return True
    return False


def is_elf_binary(path):
    try:
        with open(path, "rb") as fh:
            head = fh.read(18)
    except OSError:
        return False
    # ET_EXEC (2) or ET_DYN (3), little-endian: executables and shared objects, not .o files
    return len(head) == 18 and head[:4] == b"\x7fELF" and head[16] in (2, 3) and head[17] == 0


def source_of(path):
    """A __pycache__/X.cpython-311.pyc is from X.py, which is the packaged file."""
    d, f = os.path.split(path)
    if os.path.basename(d) == "__pycache__" and f.endswith(".pyc"):
        src = os.path.join(os.path.dirname(d), f.split(".")[0] + ".py")
        if os.path.exists(src):
            return src
    return path


# --- judging ----------------------------------------------------------------------------------------

def link_chain(path):
    """The path, each link it goes through, and where it ends."""
    chain, cur = [path], path
    for _ in range(40):
        if not os.path.islink(cur):
            break
        cur = os.path.normpath(os.path.join(os.path.dirname(cur), os.readlink(cur)))
        chain.append(cur)
    real = os.path.realpath(path)
    if real not in chain:
        chain.append(real)
    return chain


def spellings(path):
    """How dpkg may know a path: as is, with its directory resolved, and across merged /usr."""
    out = [path, os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))]
    for p in list(out):
        for top in MERGED_USR:
            if inside(p, top):
                out.append("/usr" + p)
            elif inside(p, "/usr" + top):
                out.append(p[len("/usr"):])
    return list(dict.fromkeys(out))


def owners(path):
    index, (pkgs, _) = owner_index(), package_db()
    found = set()
    for p in spellings(path):
        found |= index.get(p, set())
    return {p for p in found if p in pkgs}


def allow_listed(path):
    return any(path == a or (a.endswith("/") and path.startswith(a)) for a in ALLOW)


def judge(path, allowed):
    """(ok, owning packages, offending path): every link along the path's chain that a package owns must
    be owned by an allowed one, and the file it ends at must be owned (or allow-listed)."""
    if path.startswith("not found: "):
        return False, set(), path
    chain = link_chain(path)
    for p in chain:
        own = owners(p)
        if own and not own & allowed:
            return False, own, p
    if owners(chain[-1]) or allow_listed(path) or allow_listed(chain[-1]):
        return True, set(), path
    return False, set(), chain[-1]


def check(build, modules_file, listed, without=(), minbase=False):
    allowed, missing = allowed_packages(listed, without, minbase)
    evidence = collect(build, modules_file)
    bad, involved = [], set()
    for path, sources in sorted(evidence.items()):
        ok, own, where = judge(path, allowed)
        if ok:
            for p in link_chain(path):
                own = owners(p)
                if not os.path.isdir(p) or len(own) == 1:  # not directories that many packages share
                    involved |= own & allowed
        else:
            bad.append({"path": path, "via": where, "packages": sorted(own), "sources": sources})
    counts = {}
    for sources in evidence.values():
        for kind in {s.split(":")[0] for s in sources}:
            counts[kind] = counts.get(kind, 0) + 1
    return {"checked": len(evidence), "sources": counts, "packages": sorted(involved),
            "listed": [p for p in listed if p not in without], "allowed": len(allowed),
            "missing": missing, "still_allowed": still_allowed(listed, without, allowed), "violations": bad}


def still_allowed(listed, without, allowed):
    """{PKG from --without that is allowed all the same: the listed package that pulls it in}."""
    pkgs, provides = package_db()
    out = {}
    for name in sorted(set(without) & allowed):
        by = [p for p in listed if p not in without
              and name in closure(installed_as(p, pkgs, provides), pkgs, provides)]
        out[name] = by[0] if by else "the base system"
    return out


def hint_packages(bad):
    """Few packages that would cover every violation (with what they pull in): greedily the one covering
    most, on a tie the one owning most of the paths itself."""
    db, provides = package_db()
    todo = [set(v["packages"]) for v in bad if v["packages"]]
    reach = {p: closure([p], db, provides) for own in todo for p in own}
    picked = []
    while todo:
        best = max(sorted(reach), key=lambda p: (sum(bool(own & reach[p]) for own in todo),
                                                 sum(p in own for own in todo)))
        picked.append(best)
        todo = [own for own in todo if not own & reach[best]]
    return picked


def report(result, verbose=False, out=None):
    out = out or sys.stdout
    src = ", ".join(f"{k} {v}" for k, v in sorted(result["sources"].items()))
    print(f"check_deps: {result['checked']} system paths checked ({src}), from {len(result['packages'])} packages; "
          f"allowed: {len(result['listed'])} listed by scripts/bootstrap.sh, {result['allowed']} with their "
          f"dependencies and the base system", file=out)
    for name in result["missing"]:
        print(f"check_deps: note: bootstrap lists {name}, which nothing installed here provides", file=out)
    for name, by in result["still_allowed"].items():
        print(f"check_deps: note: --without {name}: still allowed, {by} needs it", file=out)
    bad = result["violations"]
    if not bad:
        print("check_deps: ok, every file used comes from bootstrap's packages, their dependencies "
              "or the base system", file=out)
        return
    print(f"check_deps: FAILED: {len(bad)} path{'s' * (len(bad) != 1)} from no package scripts/bootstrap.sh "
          f"installs:", file=out)
    by_pkg = {}
    for v in bad:
        key = " ".join(v["packages"]) or ("not found" if v["path"].startswith("not found: ") else "no package")
        by_pkg.setdefault(key, []).append(v)
    limit = None if verbose else 15
    for key, items in sorted(by_pkg.items()):
        for v in items[:limit]:
            via = f" (via {v['via']})" if v["via"] != v["path"] else ""
            print(f"  {v['path']}{via}: {key}  [{', '.join(v['sources'])}]", file=out)
        if limit and len(items) > limit:
            print(f"  ... and {len(items) - limit} more from {key} (--verbose lists all)", file=out)
    pkgs = hint_packages(bad)
    if pkgs:
        print(f"hint: add {' '.join(pkgs)} to scripts/bootstrap.sh", file=out)
    if any(not v["packages"] for v in bad):
        print("hint: a file owned by no package must come from one (or, if truly harmless, go in ALLOW "
              "in scripts/check_deps.py with the reason)", file=out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory (default: build)")
    ap.add_argument("--modules", help="the test-modules file (default: BUILD/test-modules.txt)")
    ap.add_argument("--groups", default="", help="bootstrap groups to allow too, e.g. bench,notebook")
    ap.add_argument("--without", action="append", default=[], metavar="PKG",
                    help="pretend bootstrap does not list PKG (repeatable)")
    ap.add_argument("--minbase", action="store_true",
                    help="base system without Priority important (as mmdebstrap --variant=minbase)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--verbose", action="store_true", help="list every violating path")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return e.code
    build = os.path.abspath(args.build)
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        print(f"check_deps: {build} is not a configured build directory: run `make build` first", file=sys.stderr)
        return 2
    modules = os.path.abspath(args.modules) if args.modules else os.path.join(build, "test-modules.txt")
    if args.modules and not os.path.exists(modules):
        print(f"check_deps: no such file: {modules}", file=sys.stderr)
        return 2
    groups = [g for g in args.groups.split(",") if g]
    listed = bootstrap_list(groups)
    unknown = [p for p in args.without if p not in listed]
    if unknown:
        print(f"check_deps: --without {' '.join(unknown)}: not listed by scripts/bootstrap.sh", file=sys.stderr)
        return 2
    result = check(build, modules, listed, tuple(args.without), args.minbase)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        report(result, args.verbose)
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
