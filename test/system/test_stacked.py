# SPDX-License-Identifier: GPL-3.0-or-later
"""Debian 12 laid out as its installer's "guided, use entire disk and set up
encrypted LVM" lays it out (test/system/mkimage --layout encrypted-lvm):
ESP, ext2 /boot, a LUKS2 container holding a volume group with root and
swap, Debian's initramfs-tools initrd with cryptsetup and lvm2.  Its
default entry is nmbl's own kernel, and its root is for that initrd to set
up: nmbl boots it through that initrd on the running kernel.

Two starts of one machine (disk and EFI variables kept):

1. nmbl's first start (BootNext): the default entry boots with one kernel
   start; cryptsetup asks for the passphrase once, on the console, and the
   test types it; multi-user.target with the entry's command line, root on
   the logical volume inside LUKS, swap on; the journal says why nmbl booted
   it so; nothing of nmbl is left (mounts, processes, device-mapper names,
   its environment).
2. The passphrase typed wrong at every prompt: Debian's initrd gives up
   and, under Secure Boot, restarts the machine (the panic= nmbl gives it)
   rather than open its shell.
"""

import re

from fixture import NMBL_BOOT_ID
from machine import (BOOT_TIMEOUT, SYSTEM_UP, Machine, Shell, check_handed_over,
                     check_nothing_left, info, take_default)

MACHINE = "stacked"
PROMPT = r"Please unlock disk (\S+): "


def test_encrypted_lvm_boots_through_its_own_initrd():
    m = info(MACHINE)
    kver, lvm = m["kernel"], m["layout"]["lvm"]
    root = m["layout"]["root_device"]
    swap = next(lv["path"] for lv in lvm["lvs"] if lv["fstype"] == "swap")
    crypt = m["layout"]["luks"]["name"]
    machine = Machine("stacked", MACHINE)

    # 1. Through Debian's initrd, on nmbl's kernel.
    with machine.vm("1-unlock") as vm:
        nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
        take_default(vm)
        asked = vm.wait_for(PROMPT, timeout=BOOT_TIMEOUT, clean=True)
        assert asked.group(1) == crypt, f"asked for {asked.group(1)}, not {crypt}"
        vm.send_raw(m["passphrase"] + "\r")
        release, state, cmdline = vm.wait_for(SYSTEM_UP, timeout=BOOT_TIMEOUT).groups()
        assert release == kver and state == "active", (release, state)
        assert cmdline.strip() == (f"BOOT_IMAGE=/vmlinuz-{kver} root={root} ro "
                                   "console=tty0 console=ttyS0,115200 quiet"), cmdline
        log = vm.clean_log()
        assert len(re.findall(PROMPT, log)) == 1, "the passphrase was asked more than once"
        assert "Booting by kexec" not in log, "nmbl kexec'd the entry"

        sh = Shell(vm, m["root_password"])
        # One kernel: nmbl's boot id, and nmbl's lines in its log.
        check_handed_over(sh, nmbl_id, kver, f"root={root} is not there, and a disk holds LUKS")
        # Root on the logical volume inside LUKS, swap on.
        assert sh.check("findmnt -n -o SOURCE /").strip() == root
        stack = sh.check(f"lsblk -n -r -s -o TYPE {root}").split()
        assert stack[:3] == ["lvm", "crypt", "part"], stack
        active = sh.check("swapon --show=NAME --noheadings").split()
        assert sh.check(f"readlink -f {swap}").strip() in active, active
        # Nothing of nmbl: the names are the distribution's, no mount, no
        # process, no variable of nmbl's.
        names = sorted(sh.check("dmsetup ls | cut -f1").split())
        assert names == sorted([crypt] + [lv["path"].split("/")[-1] for lv in lvm["lvs"]]), names
        check_nothing_left(sh)
        # nmbl blessed itself: the next start is nmbl's, not GRUB's.
        sh.check("systemctl is-active nmbl-bless.service")
        sh.reboot()

    # 2. A wrong passphrase, every time it is asked: no shell, a restart.
    with machine.vm("2-wrong") as vm:
        take_default(vm)
        vm.wait_for(PROMPT, timeout=BOOT_TIMEOUT, clean=True)
        asked = 0
        while True:
            vm.send_raw("not-the-passphrase\r")
            asked += 1
            m2 = vm.wait_for(f"({PROMPT})|(Rebooting automatically)", timeout=BOOT_TIMEOUT,
                             clean=True)
            if m2.group(3):
                break
            # It asks again for about 30 s (initramfs-tools' wait for
            # the root, running cryptroot anew each second), no longer.
            assert asked < 60, "the initrd keeps asking"
        vm.wait_exit(timeout=120)
        log = vm.clean_log()
        assert "maximum number of tries exceeded" in log, "cryptsetup did not give up"
        assert "(initramfs)" not in log, "the initrd opened its shell"
        assert asked >= 3, f"asked {asked} times"
