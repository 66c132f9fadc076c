# SPDX-License-Identifier: GPL-3.0-or-later
"""GRUB's own test suite (its tarball's tests/*.in and unit tests) on nmbl's
grub-emu, as test/grub-suite/README.md describes: every test tests.list runs
must pass, be skipped by GRUB itself on emu, or fail as GRUB's own failure (it
fails on an unpatched grub-emu of the same tarball too, which is built only
then).  'make check' builds what the tests need (test/grub-suite/grub-suite.mk).
"""

import glob
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("NMBL_BUILD", "build")


def grub_tree():
    """nmbl's GRUB source and build trees, as grub-emu-patches/grub.mk makes them."""
    sources = glob.glob(os.path.join(BUILD, "grub", "grub-*", ".patched"))
    assert len(sources) == 1, f"want one patched GRUB tree in {BUILD}/grub, found {sources}"
    return os.path.dirname(sources[0]), os.path.join(BUILD, "grub", "obj")


def test_grub_own_tests_pass_on_nmbls_grub_emu():
    src, obj = grub_tree()
    assert os.path.exists(os.path.join(BUILD, "grub-suite", "built")), \
        "the tests' inputs are not built: make grub-suite-inputs"
    logs = os.path.join(BUILD, "grub-suite", "logs")
    reference = f"make -C {TOP} BUILD={os.path.abspath(BUILD)} grub-suite-reference"
    p = subprocess.run([os.path.join(HERE, "run"), "--logs", logs,
                        "--reference", os.path.join(BUILD, "grub-ref", "obj"),
                        "--build-reference", reference, src, obj],
                       capture_output=True, text=True)
    print(p.stdout, end="")
    assert p.returncode == 0, f"GRUB's own tests failed (logs in {logs}):\n{p.stdout}{p.stderr}"
    passed = re.search(r"grub-suite: \d+ tests in \d+ s: (\d+) pass", p.stdout)
    assert passed and int(passed.group(1)) > 0, p.stdout
