#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Boot a Secure Boot VM through nmbl on this terminal.

    demo.py           the real Debian 12 machine (test/system): nmbl shows
                      Debian's own GRUB menu, boots its default entry, and
                      Debian comes up to its login prompt (root, password
                      "nmbl"); pick another entry with the arrow keys.
    demo.py --plain   the first slice's disk: a plain grub.cfg whose target
                      prints its kernel release and command line and powers
                      off (faster).

Ctrl-] leaves.  Without a terminal, the demo waits for the login prompt (or
the target's line) and ends."""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "system"))

from fixture import VM, build_path  # noqa: E402


def plain():
    import test_kexec
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


def real():
    import machine
    m = machine.Machine("demo")
    print("nmbl demo: a Debian 12 machine installed from Debian's packages, nmbl installed\n"
          "as its package installs it, under QEMU + OVMF with Secure Boot (about a minute\n"
          "under TCG). nmbl shows Debian's own GRUB menu; log in as root, password "
          f"{machine.info()['root_password']!r}. Ctrl-] quits.", flush=True)
    with m.vm("demo", echo=sys.stdout.buffer) as vm:
        if sys.stdin.isatty():
            vm.interact()
            return
        up = vm.wait_for(machine.SYSTEM_UP, timeout=machine.BOOT_TIMEOUT)
        vm.wait_for(r"nmbl-debian login: ", timeout=120, clean=True)
    print(f"\nnmbl demo: Debian booted through nmbl, kernel {up.group(1)}, "
          f"multi-user.target {up.group(2)}, command line: {up.group(3)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plain", action="store_true", help="the plain grub.cfg demo")
    args = ap.parse_args()
    if args.plain:
        plain()
    else:
        real()
    return 0


if __name__ == "__main__":
    sys.exit(main())
