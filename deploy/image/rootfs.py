#!/usr/bin/env python3
"""Writes one image's root filesystem as a deterministic tar (deploy/image/build.sh ADDs it).

Usage: rootfs.py --out FILE [--elf SRC:DEST]... [--file SRC:DEST:MODE]... [--dir DEST:MODE:UID:GID]...

--elf copies an ELF executable to DEST (mode 0755) with its `ldd` closure: every library at its
Debian path under /usr (the image has Debian's merged-/usr symlinks /lib -> usr/lib and
/lib64 -> usr/lib64), mode 0755 (the kernel maps the ELF interpreter, which must be executable).
Every image also gets /etc/passwd and /etc/group (root and nobody/nogroup 65534),
/etc/nsswitch.conf (files and dns only: both are built into glibc 2.36, so no NSS module is ever
dlopened), the CA bundle at /etc/ssl/certs/ca-certificates.crt and /tmp with mode 1777.

Entries are sorted, owned by root unless --dir says otherwise, and carry mtime 0, so the same
inputs give the same bytes (and, with `podman build --timestamp 0`, the same image ID).
"""
import argparse
import io
import os
import subprocess
import sys
import tarfile

CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PASSWD = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"
NSSWITCH = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n"
# Paths under which a library may live on the build machine (Debian 12, merged /usr).
LIB_DIRS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/")


def ldd_closure(path):
    """Absolute paths of the libraries `ldd` resolves for an ELF file (interpreter included)."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"rootfs.py: ldd {path} failed: {out.stdout}{out.stderr}")
    libs = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if "=>" in parts:
            target = parts[parts.index("=>") + 1]
            if target == "not":
                sys.exit(f"rootfs.py: {path}: library not found: {line.strip()}")
            if target.startswith("/"):
                libs.append(target)
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])
    for lib in libs:
        if not lib.startswith(LIB_DIRS):
            sys.exit(f"rootfs.py: {path} needs {lib}, outside the system library folders "
                     "(a shared library of the Bazel build? the services link their own code statically)")
    return libs


def image_path(lib):
    """Where a library goes in the image: its path, under /usr when ldd reports /lib or /lib64."""
    return "/usr" + lib if lib.startswith(("/lib/", "/lib64/")) else lib


class Tree:
    def __init__(self):
        self.entries = {}  # image path (no leading /) -> (kind, mode, uid, gid, payload)

    def _parents(self, path):
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            self.entries.setdefault(d, ("dir", 0o755, 0, 0, None))

    def add_dir(self, path, mode=0o755, uid=0, gid=0):
        path = path.strip("/")
        self._parents(path)
        self.entries[path] = ("dir", mode, uid, gid, None)

    def add_bytes(self, path, data, mode):
        path = path.strip("/")
        self._parents(path)
        old = self.entries.get(path)
        if old and old[4] != data:
            sys.exit(f"rootfs.py: two different files for /{path}")
        self.entries[path] = ("file", mode, 0, 0, data)

    def add_file(self, src, path, mode):
        with open(os.path.realpath(src), "rb") as f:
            self.add_bytes(path, f.read(), mode)

    def add_symlink(self, path, target):
        path = path.strip("/")
        self._parents(path)
        self.entries[path] = ("symlink", 0o777, 0, 0, target)

    def write(self, out):
        with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(self.entries):
                kind, mode, uid, gid, payload = self.entries[path]
                info = tarfile.TarInfo(path)
                info.mode, info.uid, info.gid, info.mtime = mode, uid, gid, 0
                info.uname = info.gname = ""
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif kind == "symlink":
                    info.type = tarfile.SYMTYPE
                    info.linkname = payload
                    tar.addfile(info)
                else:
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--elf", action="append", default=[], metavar="SRC:DEST")
    p.add_argument("--file", action="append", default=[], metavar="SRC:DEST:MODE")
    p.add_argument("--dir", action="append", default=[], metavar="DEST:MODE:UID:GID")
    args = p.parse_args()

    tree = Tree()
    # Debian's merged /usr, so a path a library or a dlopen names resolves as on the build machine.
    tree.add_dir("usr/lib")
    tree.add_dir("usr/lib64")
    tree.add_symlink("lib", "usr/lib")
    tree.add_symlink("lib64", "usr/lib64")
    tree.add_bytes("etc/passwd", PASSWD.encode(), 0o644)
    tree.add_bytes("etc/group", GROUP.encode(), 0o644)
    tree.add_bytes("etc/nsswitch.conf", NSSWITCH.encode(), 0o644)
    tree.add_file(CA_BUNDLE, CA_BUNDLE, 0o644)
    tree.add_dir("tmp", 0o1777)
    for spec in args.elf:
        src, dest = spec.split(":")
        tree.add_file(src, dest, 0o755)
        for lib in ldd_closure(src):
            tree.add_file(lib, image_path(lib), 0o755)
    for spec in args.file:
        src, dest, mode = spec.split(":")
        tree.add_file(src, dest, int(mode, 8))
    for spec in args.dir:
        dest, mode, uid, gid = spec.split(":")
        tree.add_dir(dest, int(mode, 8), int(uid), int(gid))
    tree.write(args.out)


if __name__ == "__main__":
    main()
