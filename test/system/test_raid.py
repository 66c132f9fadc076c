# SPDX-License-Identifier: GPL-3.0-or-later
"""A server laid out as RHEL's installer lays one out on two mirrored disks
(test/system/mkimage --layout raid-lvm): the ESP on the first; an md RAID 1
of both holding an XFS /boot; another holding the volume group "rhel" with
root (XFS in LUKS2, its key enrolled in the machine's TPM as
systemd-cryptenroll enrolls it) and swap; a dracut initrd, host-only, with
systemd in it; the command line RHEL writes (rd.md.uuid, rd.lvm.lv,
rd.luks.uuid, resume).  And an admin's
copy of /boot's kernel and initrd in a logical volume of its own, with a
menu entry of its own (grub.d, reached as grub-mkconfig reaches any
device: insmod lvm, an lvmid/ search hint).  Its nmbl image is one built
with LVM's tool (NMBL_LVM=1).  Its default entry is nmbl's own kernel:
nmbl boots it through that initrd on the running kernel.

GRUB reads such a /boot by assembling the arrays and the volume group
itself; nmbl's menu reads it through Linux's md and device-mapper, which
nmbl's init set up read-only before the menu and took down before the
hand-over.

Two starts of one machine (disks and EFI variables kept):

1. nmbl's first start (BootNext), both disks there: nmbl assembles the
   /boot array, its menu reads grub.cfg, kernel and initrd on it; one
   kernel start; dracut's systemd assembles the root's array, activates
   the volumes, unlocks the root's LUKS with the TPM (nothing typed) and
   switches root; multi-user.target with the entry's command line, root
   XFS in LUKS in the logical volume on the array of both disks,
   /boot XFS on the other array, swap on; every array and volume the
   system's own, read-write; the journal says why nmbl booted it so;
   nothing of nmbl is left.  The next start's entry is asked for as
   systemd's tools ask (bootctl set-oneshot): the copy in LVM.
2. The second disk pulled out: nmbl starts both arrays degraded and reads
   the entry's kernel and initrd in the logical volume; the system's own
   boot starts the arrays degraded (dracut's timeout scripts, once its
   wait for devices is two-thirds over, then mdadm's last resort for
   /boot), and the machine comes up as before, on one disk.
"""

from fixture import NMBL_BOOT_ID
from machine import (BOOT_TIMEOUT, SYSTEM_UP, Machine, Shell, check_handed_over,
                     check_nothing_left, info, selected, take_default)

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


def check_array(sh, raid, disks):
    """The array RAID running on the members of DISKS (0, 1), as the
    system's own mdadm assembled it: writable, not nmbl's read-only one."""
    md = sh.check(f"readlink -f /dev/md/{raid['name']}").strip()
    detail = sh.check(f"mdadm --detail {md}")
    assert f"UUID : {raid['uuid']}" in detail, detail
    # /dev/vdX: the machine's disks in order, X from "a".
    members = [dev for dev in raid["members"] if ord(dev[len("/dev/vd")]) - ord("a") in disks]
    assert sorted(sh.check(f"ls /sys/block/{md.split('/')[-1]}/slaves").split()) == \
        sorted(dev.split("/")[-1] for dev in members), detail
    state = sh.check(f"cat /sys/block/{md.split('/')[-1]}/md/array_state").strip()
    assert state in ("clean", "active", "write-pending", "active-idle"), state
    return md


def check_stack(sh, m, disks):
    """Root and swap where the layout puts them, on an array of DISKS'
    members, and /boot on the other; root unlocked by the TPM."""
    layout = m["layout"]
    root, luks = layout["root_device"], layout["luks"]
    swap = next(lv["path"] for lv in layout["lvm"]["lvs"] if lv["fstype"] == "swap")
    assert sh.check("findmnt -n -o SOURCE,FSTYPE,UUID /").split() == \
        [root, "xfs", layout["root_uuid"]]
    stack = sh.check(f"lsblk -n -r -s -o TYPE {root}").split()
    assert stack[:4] == ["crypt", "lvm", "raid1", "part"], stack
    status = sh.check(f"cryptsetup status {luks['name']}")
    assert "type:    LUKS2" in status and f"device:  {luks['on']}" in status, status
    # systemd-cryptsetup in dracut's initrd unlocked it with the key the
    # header's TPM2 token holds (through libcryptsetup's token plugin,
    # which logs nothing): nobody was asked for the passphrase, nothing
    # was typed.
    unit = f"systemd-cryptsetup@$(systemd-escape {luks['name']}).service"
    assert [sh.check(f'systemctl show -P {prop} "{unit}"').strip()
            for prop in ("ActiveState", "Result")] == ["active", "success"]
    assert "systemd-tpm2" in sh.check(f"cryptsetup luksDump {luks['on']}")
    assert "Please enter passphrase" not in sh.vm.clean_log()
    active = sh.check("swapon --show=NAME --noheadings").split()
    assert sh.check(f"readlink -f {swap}").strip() in active, active
    check_array(sh, layout["raid"], disks)
    boot_md = check_array(sh, layout["boot_raid"], disks)
    assert sh.check("findmnt -n -o SOURCE,FSTYPE,UUID /boot").split() == \
        [boot_md, "xfs", layout["boot_raid"]["fs_uuid"]]
    # The volumes are the distribution's, named as it names them, and
    # writable: none is what nmbl activated read-only for its menu.
    names = sh.check("dmsetup ls | cut -f1").split()
    ours = [lv["path"].split("/")[-1] for lv in layout["lvm"]["lvs"]] + [luks["name"]]
    assert set(names) <= set(ours) and \
        {root.split("/")[-1], luks["on"].split("/")[-1], swap.split("/")[-1]} <= set(names), names
    for name in names:
        assert "Read-only" not in sh.check(f"dmsetup info {name}"), name


def nmbl_assembled(vm, name, found, of):
    """nmbl's console says mdadm started the array NAME with FOUND of OF
    members before its menu."""
    line = (f"mdadm: /dev/md/{name} has been started with {found} drive"
            + ("s." if found == of else f"{'s' if found > 1 else ''} (out of {of})."))
    assert line in vm.clean_log(), line


def test_raid1_lvm_boots_through_dracut():
    m = info(MACHINE)
    kver, raid = m["kernel"], m["layout"]["raid"]
    machine = Machine("raid", MACHINE)

    # 1. Both disks: through dracut's initrd, on nmbl's kernel.
    with machine.vm("1-both", tb_size=TB_SIZE) as vm:
        nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
        take_default(vm)
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
        nmbl_assembled(vm, m["layout"]["boot_raid"]["name"], 2, 2)
        check_stack(sh, m, (0, 1))
        assert sh.check("grep -c '\\[UU\\]' /proc/mdstat").strip() == "2"
        check_nothing_left(sh)
        sh.check("systemctl is-active nmbl-bless.service")
        # The next start: the copy of /boot in LVM.
        altboot = next(lv for lv in m["layout"]["lvm"]["lvs"] if lv.get("entry"))
        sh.check(f"bootctl set-oneshot {altboot['entry']}")
        sh.reboot()

    # 2. The second disk pulled out: degraded, as the distribution starts it.
    with machine.vm("2-degraded", without=(1,), tb_size=TB_SIZE) as vm:
        nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
        # The entry bootctl asked for is the menu's default now.
        take_default(vm)
        release, state, cmdline = vm.wait_for(SYSTEM_UP, timeout=BOOT_TIMEOUT).groups()
        assert (release, state) == (kver, "active") and cmdline.strip() == expected_cmdline(m)
        sh = Shell(vm, m["root_password"])
        assert sh.check("cat /proc/sys/kernel/random/boot_id").strip() == nmbl_id, \
            "a second kernel started"
        # The entry asked for, read from the logical volume on the array
        # nmbl started degraded.
        assert selected(sh) == altboot["entry"]
        for array in (raid, m["layout"]["boot_raid"]):
            nmbl_assembled(vm, array["name"], 1, 2)
        check_stack(sh, m, (0,))
        mdstat = sh.check("cat /proc/mdstat")
        assert mdstat.count("[2/1]") == 2 and mdstat.count("[U_]") == 2, mdstat
        check_nothing_left(sh)
