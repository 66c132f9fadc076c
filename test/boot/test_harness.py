# SPDX-License-Identifier: GPL-3.0-or-later
"""The VM harness itself: disks as laid out, and Secure Boot really enforced
(an unsigned EFI program is refused), or no VM test proves anything."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_vm_harness_enforces_secure_boot():
    p = subprocess.run([sys.executable, os.path.join(HERE, "..", "vm", "selftest.py")],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0 and "vm-selftest: ok" in p.stdout, p.stdout + p.stderr
