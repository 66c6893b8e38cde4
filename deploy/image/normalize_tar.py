#!/usr/bin/env python3
"""Rewrites a tar (an OCI archive from `skopeo copy`) with sorted members, mtime 0 and root
ownership, so the same image gives the same archive bytes. Usage: normalize_tar.py FILE"""
import os
import sys
import tarfile

path = sys.argv[1]
tmp = path + ".normalized"
with tarfile.open(path) as src, tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as dst:
    for member in sorted(src.getmembers(), key=lambda m: m.name):
        member.mtime, member.uid, member.gid, member.uname, member.gname = 0, 0, 0, "", ""
        member.pax_headers = {}
        dst.addfile(member, src.extractfile(member) if member.isfile() else None)
os.replace(tmp, path)
