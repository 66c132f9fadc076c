# SPDX-License-Identifier: GPL-3.0-or-later
"""Volumes that cannot be set up whole: a volume group one of whose disks
is gone, a RAID 5 short of two of its three members.  nmbl's image built
with LVM's tool (NMBL_LVM=1, as a machine whose /boot is in LVM builds it)
sets up for its menu what can be set up and says what cannot (the tools'
own words, then one line of nmbl's); GRUB's entries on the missing volumes
fail with GRUB's own errors and fall back, as on GRUB; the entry on the
volume that is whole boots without a second kernel, and nothing nmbl set
up, or half set up, is left in the booted system.

The host has no device-mapper or md: LVM's tool writes the metadata onto
loop devices without activating anything, the file system is written where
the volume's extents are, and the member's md superblock is written here
(what mdadm --create writes for a RAID 5 of three: version 1.2, 4 KiB into
the member), then read back by the host's mdadm --examine."""

import os
import re
import struct
import subprocess
import tempfile
import uuid

from fixture import (BOOT_TIMEOUT, BOOT_UUID, NMBL_BOOT_ID, ROOT_UUID, TARGET_KERNEL,
                     TARGET_UP, VM, build_path, kver, make_disk, partition, words)
from vm import KEY_ENTER
import mkdisk

MiB = 1 << 20
VG = "nmblvols"
# The volume that is whole holds the entry's kernel and initrd; the other
# lies on a second disk, which the machine no longer has.
WHOLE_LV, GONE_LV = "boot", "gone"
WHOLE_FS_UUID = "b0075e1f-0d15-4a3e-8c2b-6e6d626c0f01"
GONE_FS_UUID = "b0075e1f-0d15-4a3e-8c2b-6e6d626c0f02"
PV_MIB, WHOLE_MIB, GONE_DISK_MIB, GONE_MIB = 32, 24, 16, 8
# The RAID 5 of three members, one of them here.
MD_MIB = 8
MD_NAME = "any:archive"
MD_UUID = "6e6d626c-5a1d-4e05-9d3a-000000000005"
MD_FS_UUID = "b0075e1f-0d15-4a3e-8c2b-6e6d626c0f03"
MD_MAGIC = 0xA92B4EFC
# The partitions after the ESP, /boot and root.
PV_PARTITION, MD_PARTITION = 4, 5
# Direct boot: the entries keep nmbl's own consoles (its UKI's command
# line), and add nothing that would make nmbl kexec them.
CONSOLES = "console=tty0 console=ttyS0,115200"
ENTRY = "nmbl.entry=whole"


def lvm(devices, *args):
    """LVM's tool on the host, seeing only the loop devices DEVICES, never
    activating (the host has no device-mapper)."""
    accept = ", ".join(f'"a|^{d}$|"' for d in devices)
    # No copy of the metadata in the host's /etc/lvm, no lock there either.
    config = (f'devices {{ use_devicesfile=0 filter=[ {accept}, "r|.*|" ] }} '
              'backup { backup=0 archive=0 }')
    env = dict(os.environ, LVM_SUPPRESS_FD_WARNINGS="1")
    return subprocess.run(["lvm", args[0], "--config", config] + list(args[1:]),
                          capture_output=True, text=True, check=True, env=env).stdout


def extent(image, number):
    """Where partition NUMBER of IMAGE lies: (offset, size) in bytes."""
    p = partition(image, number)
    return p["start"] * 512, p["size"] * 512


def loop(path, offset=0, size=None):
    cmd = ["losetup", "--find", "--show", "--offset", str(offset)]
    if size:
        cmd += ["--sizelimit", str(size)]
    return subprocess.run(cmd + [path], capture_output=True, text=True,
                          check=True).stdout.strip()


def write_at(image, offset, path):
    subprocess.run(["dd", f"if={path}", f"of={image}", "bs=1M", f"seek={offset}",
                    "oflag=seek_bytes", "conv=notrunc,sparse", "status=none"], check=True)


def make_volume_group(image, work, boot_tree):
    """The VG on the disk's PV partition and on a second disk (thrown away
    afterwards): the whole LV on the first, with an ext4 holding BOOT_TREE,
    the other on the second.  Returns {lv: "lvmid/<VG UUID>/<LV UUID>"}."""
    start, size = extent(image, PV_PARTITION)
    gone = os.path.join(work, "gone-disk.img")
    with open(gone, "wb") as f:
        f.truncate(GONE_DISK_MIB * MiB)
    here, there = loop(image, start, size), loop(gone)
    try:
        both = (here, there)
        lvm(both, "pvcreate", "-q", here, there)
        lvm(both, "vgcreate", "-q", "-s", "1M", VG, here, there)
        for lv, mib, pv in ((WHOLE_LV, WHOLE_MIB, here), (GONE_LV, GONE_MIB, there)):
            lvm(both, "lvcreate", "-q", "--driverloaded", "n", "-an", "-Zn", "-Wn",
                "-L", f"{mib}M", "-n", lv, VG, pv)
        pe_start = int(lvm(both, "pvs", "--noheadings", "--nosuffix", "--units", "b",
                           "-o", "pe_start", here).split()[0])
        ids = {}
        for line in lvm(both, "lvs", "--noheadings", "-o", "lv_name,vg_uuid,lv_uuid",
                        VG).splitlines():
            lv, vg_uuid, lv_uuid = line.split()
            ids[lv] = f"lvmid/{vg_uuid}/{lv_uuid}"
    finally:
        subprocess.run(["losetup", "-d", here, there], check=True)
    fs = os.path.join(work, "whole.ext4")
    mkdisk.make_extfs(fs, WHOLE_MIB * MiB, boot_tree, WHOLE_FS_UUID, None)
    # The whole volume's first extent is the PV's first.
    write_at(image, start + pe_start, fs)
    os.unlink(fs)
    return ids


def md_member(image, work):
    """Member 0 of a RAID 5 of three (md 1.2, left-symmetric, 512 KiB
    chunks, in sync) on the MD partition; its two others are gone."""
    start, size = extent(image, MD_PARTITION)
    data_offset = 2048  # sectors: 1 MiB, as mdadm puts it on small members
    data_size = size // 512 - data_offset
    chunk = 1024
    raid_disks = 3
    sb = bytearray(256 + 2 * raid_disks)
    struct.pack_into("<IIII", sb, 0, MD_MAGIC, 1, 0, 0)
    sb[16:32] = uuid.UUID(MD_UUID).bytes
    sb[32:32 + len(MD_NAME)] = MD_NAME.encode()
    now = 1767225600  # 2026-01-01: a fixed time, so that the bytes are too
    struct.pack_into("<QiIQII", sb, 64, now, 5, 2, data_size - data_size % chunk, chunk,
                     raid_disks)
    struct.pack_into("<QQQ", sb, 128, data_offset, data_size, 8)
    struct.pack_into("<I", sb, 160, 0)  # this member's number
    sb[168:184] = uuid.UUID(int=0x6E6D626C_0000_4000_8000_000000000D00).bytes
    struct.pack_into("<QQQ", sb, 192, now, 1, (1 << 64) - 1)  # events 1, in sync
    struct.pack_into("<I", sb, 220, raid_disks)
    for role in range(raid_disks):
        struct.pack_into("<H", sb, 256 + 2 * role, role)
    words32 = struct.unpack_from(f"<{len(sb) // 4}I", sb)
    total = sum(words32) + (struct.unpack_from("<H", sb, len(sb) - 2)[0] if len(sb) % 4 else 0)
    struct.pack_into("<I", sb, 216, ((total & 0xFFFFFFFF) + (total >> 32)) & 0xFFFFFFFF)
    member = os.path.join(work, "md-member.img")
    with open(member, "wb") as f:
        f.truncate(size)
        f.seek(4096)
        f.write(sb)
    examine = subprocess.run(["mdadm", "--examine", member], capture_output=True, text=True)
    assert examine.returncode == 0 and "Raid Level : raid5" in examine.stdout and \
        "Raid Devices : 3" in examine.stdout, examine.stdout + examine.stderr
    write_at(image, start, member)
    os.unlink(member)
    return "mduuid/" + MD_UUID.replace("-", "")


def grub_entry(title, device, fs_uuid, module, extra):
    """An entry as grub-mkconfig writes one for a kernel on DEVICE (GRUB's
    name of an md array or LVM volume): the module, the device, then the
    file system by its UUID with the device as the hint."""
    k = kver()
    return f"""menuentry '{title}' --class debian {{
	insmod {module}
	insmod ext2
	set root='{device}'
	if [ x$feature_platform_search_hint = xy ]; then
	  search --no-floppy --fs-uuid --set=root --hint='{device}'  {fs_uuid}
	else
	  search --no-floppy --fs-uuid --set=root {fs_uuid}
	fi
	echo	'Loading Linux {k} ...'
	linux	/vmlinuz-{k} root=UUID={ROOT_UUID} ro {CONSOLES} {extra}
	initrd	/initrd.img-{k}
}}
"""


def volumes_disk():
    """The disk: nmbl's LVM image on the ESP, grub.cfg on /boot, the
    target's root, the PV, the md member."""
    k = kver()
    files = {f"vmlinuz-{k}": build_path("test", "vmlinuz-test"),
             f"initrd.img-{k}": build_path("test", "target-initrd.img")}
    # grub.cfg names the volumes by their UUIDs, which LVM makes: the disk
    # is made in two steps, its grub.cfg last.
    base = make_disk("volumes-base", None, {}, uki="test/nmbl-toolprobe.efi", boot_size=8,
                     empty_size=[PV_MIB, MD_MIB])
    work = build_path("test", "volumes")
    os.makedirs(work, exist_ok=True)
    image = os.path.join(work, "disk.img")
    subprocess.run(["cp", "--sparse=always", base, image], check=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        tree = os.path.join(tmp, "boot")
        os.makedirs(tree)
        for name, src in files.items():
            subprocess.run(["cp", src, os.path.join(tree, name)], check=True)
        ids = make_volume_group(image, tmp, tree)
        md = md_member(image, tmp)
        cfg = ("set default=0\nset fallback='1 2'\nset timeout=0\n\n"
               + grub_entry("On the volume whose disk is gone", ids[GONE_LV], GONE_FS_UUID,
                            "lvm", "nmbl.entry=gone")
               + grub_entry("On the RAID 5 short of two members", md, MD_FS_UUID,
                            "mdraid1x", "nmbl.entry=raid5")
               + grub_entry("On the volume that is whole", ids[WHOLE_LV], WHOLE_FS_UUID,
                            "lvm", ENTRY))
        boot_tree = os.path.join(tmp, "grub-boot")
        os.makedirs(os.path.join(boot_tree, "grub"))
        with open(os.path.join(boot_tree, "grub", "grub.cfg"), "w") as f:
            f.write(cfg)
        # /boot (partition 2) holds only grub.cfg: rewritten in place.
        start, size = extent(image, 2)
        fs = os.path.join(tmp, "boot.ext4")
        mkdisk.make_extfs(fs, size, boot_tree, BOOT_UUID, None)
        write_at(image, start, fs)
    return image, ids, md


def falling_back(title):
    """What GRUB says when an entry failed and it tries the next fallback."""
    return words("Falling back to") + r"\s+[`']" + words(title) + "'"


def test_missing_pv_and_short_raid_say_so_and_the_whole_volume_boots():
    image, ids, md = volumes_disk()
    with VM(image, snapshot=True, log_file=build_path("test", "volumes.log")) as vm:
        nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
        # Before the menu: each tool's own sentences, then nmbl's.
        vm.wait_for(r"mdadm: Not enough devices to start the array", timeout=BOOT_TIMEOUT,
                    clean=True)
        vm.wait_for(words(f"Refusing activation of partial LV {VG}/{GONE_LV}."),
                    timeout=BOOT_TIMEOUT, clean=True)
        vm.wait_for(r"cannot activate LVM's volumes for the menu \(status \d+\)",
                    timeout=BOOT_TIMEOUT, clean=True)
        # GRUB's errors (its search finds no file system of that UUID), its
        # fallbacks (no countdown: timeout=0), and the entry that boots.
        for fs_uuid, next_title in ((GONE_FS_UUID, "On the RAID 5 short of two members"),
                                    (MD_FS_UUID, "On the volume that is whole")):
            vm.wait_for(words(f"error: no such device: {fs_uuid}."), timeout=BOOT_TIMEOUT,
                        clean=True)
            # GRUB's prompt after a failed entry (it goes on by itself
            # after 10 s): a key, as a user at the console would press.
            vm.wait_for("Press any key to continue", timeout=60, clean=True)
            vm.send(KEY_ENTER)
            vm.wait_for(falling_back(next_title), timeout=60, clean=True)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        kernel = vm.wait_for(TARGET_KERNEL, timeout=60)
        procs = vm.wait_for(r"NMBL-TARGET-PROCS([^\r\n]*)\r?\n", timeout=60).group(1).split()
        block = vm.wait_for(r"NMBL-TARGET-BLOCK([^\r\n]*)\r?\n", timeout=60).group(1).split()
        vm.wait_exit(timeout=60)
        log = vm.clean_log()
    k = kver()
    assert up.group(2) == (f"BOOT_IMAGE=/vmlinuz-{k} root=UUID={ROOT_UUID} ro {CONSOLES} "
                           f"{ENTRY}"), up.group(2)
    # Read from the volume nmbl activated for its menu, and booted without
    # a second kernel...
    assert kernel.group(1) == nmbl_id and kernel.group(2) == "1", \
        f"a second kernel started: {kernel.group(0)}"
    # ...which has none of what nmbl set up for the menu: no volume, no
    # array, not even the one mdadm could not start.
    assert block == ["vda"], block
    for said in ("cannot deactivate", "cannot stop the md arrays", "Kernel panic"):
        assert said not in log, said
    check_tool_contained(log, procs)


# What the taken-over tool tried, and what it must have got: each refused
# (the filter: EPERM by name, ENOSYS for a call newer than its list; the
# read-only root: EROFS).
PROBE = re.compile(r"nmbl-tool-probe: (\S+) (\S+)")
REFUSED = {"open_tree_attr": "ENOSYS", "quotactl_fd": "ENOSYS", "write-console-program": "EROFS",
           "create-modprobe": "EROFS", "mknod-disk": "EPERM", "mknod-mem": "EPERM"}


def check_tool_contained(log, procs):
    """Both of mdadm's runs (assembling, stopping) said what they got, the
    same; no process of theirs in the booted system."""
    first = "nmbl-tool-probe: open_tree_attr"
    runs = [dict(PROBE.findall(first + part)) for part in log.split(first)[1:]]
    assert len(runs) == 2, f"mdadm ran {len(runs)} times, not 2: {log[-3000:]}"
    for said in runs:
        for call, want in REFUSED.items():
            assert said.get(call) == want, (call, said)
        assert "open-made-disk" not in said, said
        # The console, where a passphrase is typed, is /dev/null (1:3).
        assert said.get("console") == "1:3", said
    # The process each run left, in a session of its own: ended with the
    # tool, before the hand-over.
    assert not [p for p in procs if "escapee" in p], procs
