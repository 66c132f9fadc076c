# SPDX-License-Identifier: GPL-3.0-or-later
"""A server laid out as RHEL's installer lays one out on two disks
(test/system/mkimage --layout raid-lvm): the ESP and an XFS /boot on the
first; an md RAID 1 of both holding the volume group "rhel" with root (XFS)
and swap; a dracut initrd, host-only, with systemd in it; the command line
RHEL writes (rd.md.uuid, rd.lvm.lv, resume).  Its default entry is nmbl's
own kernel: nmbl boots it through that initrd on the running kernel.

Two starts of one machine (disks and EFI variables kept):

1. nmbl's first start (BootNext), both disks there: one kernel start;
   dracut's systemd assembles the array, activates the volumes and
   switches root; multi-user.target with the entry's command line, root
   the XFS logical volume on the array of both disks, /boot XFS, swap on;
   the journal says why nmbl booted it so; nothing of nmbl is left.
2. The second disk pulled out: the array starts degraded, as the
   distribution's own boot starts it (dracut's timeout scripts, once its
   wait for devices is two-thirds over), and the machine comes up as
   before, on one disk.
"""

from fixture import NMBL_BOOT_ID
from machine import (BOOT_TIMEOUT, MENU_READY, SYSTEM_UP, Machine, Shell,
                     check_handed_over, check_nothing_left, info)

MACHINE = "raid"
# QEMU's translated-code cache kept small, as the benchmark keeps it
# (test/bench/bench.py): with QEMU's default (1 GiB) the translations of
# nmbl's own programs outlive the hand-over to dracut's initrd, whose
# stores to those pages then take QEMU's self-modifying-code path; 2 of 3
# such starts of this machine ran minutes slow (udev's programs past its
# 60 s warning, device units timed out), none of 6 with 32 MiB.  Not for
# the first machine, whose test installs kernels (dpkg, update-initramfs):
# it took 507 s with the small cache, 383 s without.
TB_SIZE = 32


def expected_cmdline(m):
    return (f"BOOT_IMAGE=/vmlinuz-{m['kernel']} root={m['layout']['root_device']} ro "
            f"{m['cmdline']} console=tty0 console=ttyS0,115200 quiet")


def check_stack(sh, m, members):
    """Root and swap where the layout puts them, on an array of MEMBERS."""
    layout, raid = m["layout"], m["layout"]["raid"]
    root = layout["root_device"]
    swap = next(lv["path"] for lv in layout["lvm"]["lvs"] if lv["fstype"] == "swap")
    assert sh.check("findmnt -n -o SOURCE,FSTYPE /").split() == [root, "xfs"]
    assert sh.check("findmnt -n -o FSTYPE /boot").strip() == "xfs"
    stack = sh.check(f"lsblk -n -r -s -o TYPE {root}").split()
    assert stack[:3] == ["lvm", "raid1", "part"], stack
    active = sh.check("swapon --show=NAME --noheadings").split()
    assert sh.check(f"readlink -f {swap}").strip() in active, active
    md = sh.check(f"readlink -f /dev/md/{raid['name']}").strip()
    detail = sh.check(f"mdadm --detail {md}")
    assert f"UUID : {raid['uuid']}" in detail, detail
    assert sorted(sh.check(f"ls /sys/block/{md.split('/')[-1]}/slaves").split()) == \
        sorted(dev.split("/")[-1] for dev in members), detail
    # The names are the distribution's: the volumes and nothing else.
    names = sorted(sh.check("dmsetup ls | cut -f1").split())
    assert names == sorted(lv["path"].split("/")[-1] for lv in layout["lvm"]["lvs"]), names


def test_raid1_lvm_boots_through_dracut():
    m = info(MACHINE)
    kver, raid = m["kernel"], m["layout"]["raid"]
    machine = Machine("raid", MACHINE)

    # 1. Both disks: through dracut's initrd, on nmbl's kernel.
    with machine.vm("1-both", tb_size=TB_SIZE) as vm:
        nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        release, state, cmdline = vm.wait_for(SYSTEM_UP, timeout=BOOT_TIMEOUT).groups()
        assert release == kver and state == "active", (release, state)
        assert cmdline.strip() == expected_cmdline(m), cmdline
        assert "Booting by kexec" not in vm.clean_log(), "nmbl kexec'd the entry"

        sh = Shell(vm, m["root_password"])
        check_handed_over(sh, nmbl_id, kver,
                          "its root needs LVM, which its own initrd sets up (rd.lvm.lv=)")
        # dracut's systemd set the root up and switched to it.
        sh.check("journalctl -b -o cat _PID=1 --grep 'Switching root'")
        sh.check("journalctl -b -o cat --grep 'dracut-pre-pivot|dracut pre-pivot'")
        check_stack(sh, m, raid["members"])
        assert "[UU]" in sh.check("cat /proc/mdstat")
        check_nothing_left(sh)
        sh.check("systemctl is-active nmbl-bless.service")
        sh.reboot()

    # 2. The second disk pulled out: degraded, as the distribution starts it.
    with machine.vm("2-degraded", without=(1,), tb_size=TB_SIZE) as vm:
        nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
        release, state, cmdline = vm.wait_for(SYSTEM_UP, timeout=BOOT_TIMEOUT).groups()
        assert (release, state) == (kver, "active") and cmdline.strip() == expected_cmdline(m)
        sh = Shell(vm, m["root_password"])
        assert sh.check("cat /proc/sys/kernel/random/boot_id").strip() == nmbl_id, \
            "a second kernel started"
        check_stack(sh, m, raid["members"][:1])
        mdstat = sh.check("cat /proc/mdstat")
        assert "[2/1]" in mdstat and "[U_]" in mdstat, mdstat
