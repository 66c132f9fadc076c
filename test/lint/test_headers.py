# SPDX-License-Identifier: GPL-3.0-or-later
"""The programs use libnmbl through its public header only."""

import glob
import os
import re

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LOADER = os.path.join(TOP, "nmbl-loader")


def test_programs_include_no_private_header():
    programs = sorted(glob.glob(os.path.join(LOADER, "tools", "*.c")))
    assert len(programs) >= 3, programs
    public = {"libnmbl.h"} | {os.path.basename(h) for h in
                              glob.glob(os.path.join(LOADER, "shared", "*.h"))}
    for path in programs:
        with open(path) as f:
            local = set(re.findall(r'^#include "([^"]+)"', f.read(), re.M))
        assert local <= public, (path, sorted(local - public))
