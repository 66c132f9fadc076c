#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Boot the first slice's Secure Boot VM on this terminal: the nmbl UKI shows
the GRUB menu of a plain grub.cfg; pick an entry with the arrow keys and
Enter (or let the timeout pick the default), and watch nmbl kexec the target
kernel, whose init prints its release and command line and powers off.
Ctrl-] leaves early."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import test_kexec  # noqa: E402
from fixture import VM, build_path  # noqa: E402


def main():
    disk = test_kexec.disk()
    print(f"nmbl demo: booting {disk} under QEMU + OVMF with Secure Boot "
          "(about a minute under TCG); Ctrl-] quits", flush=True)
    with VM(disk, snapshot=True, echo=sys.stdout.buffer,
            log_file=build_path("test", "demo.log")) as vm:
        if sys.stdin.isatty():
            vm.interact()
        else:
            vm.wait_exit(timeout=600)
        up = vm.wait_for(r"NMBL-TARGET-UP[^\r\n]*", timeout=1, since=0)
    print(f"\nnmbl demo: the target kernel booted: {up.group(0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
