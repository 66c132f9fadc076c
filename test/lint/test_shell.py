# SPDX-License-Identifier: GPL-3.0-or-later
"""Every shell script of the project passes shellcheck."""

import os
import subprocess

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def shell_scripts():
    for top, dirs, files in os.walk(TOP):
        dirs[:] = [d for d in dirs if d not in (".git", "build", "__pycache__")]
        for name in files:
            path = os.path.join(top, name)
            try:
                with open(path, "rb") as f:
                    first = f.readline()
            except OSError:
                continue
            if name.endswith(".sh") or first.startswith((b"#!/bin/sh", b"#!/bin/bash")):
                yield path


def test_shellcheck_clean():
    scripts = sorted(shell_scripts())
    assert len(scripts) > 10, f"found only {scripts}"
    # dracut sources its hooks and module-setup.sh, and sets their variables.
    p = subprocess.run(["shellcheck", "-x", "-e", "SC2154"] + scripts,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
