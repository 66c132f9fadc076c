# SPDX-License-Identifier: GPL-3.0-or-later
"""The programs use libnmbl through its public header only."""

import glob
import os
import re

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LOADER = os.path.join(TOP, "nmbl-loader")
# Both forms: the programs are built with -Inmbl-loader/libnmbl, so
# <nmbl-private.h> finds the private header as well as "nmbl-private.h" does.
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def headers(folder):
    return {os.path.basename(h) for h in glob.glob(os.path.join(LOADER, folder, "*.h"))}


def test_programs_include_no_private_header():
    # A program of several files (nmbl-init) has a folder and a header of
    # its own, which its files may include.
    programs = sorted(glob.glob(os.path.join(LOADER, "tools", "*.c")) +
                      glob.glob(os.path.join(LOADER, "tools", "*", "*.c")))
    assert len(programs) >= 8, programs
    public = {"libnmbl.h"} | headers("shared")
    private = headers("libnmbl") - public
    assert "nmbl-private.h" in private, private
    for path in programs:
        with open(path) as f:
            included = INCLUDE.findall(f.read())
        ours = {os.path.basename(name) for _, name in included} & private
        local = {name for form, name in included if form == '"'}
        assert not ours, (path, sorted(ours))
        own = {os.path.basename(h) for h in glob.glob(os.path.join(os.path.dirname(path), "*.h"))}
        assert local <= public | own, (path, sorted(local - public - own))
