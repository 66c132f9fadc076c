# SPDX-License-Identifier: GPL-3.0-or-later
"""The initramfs inside nmbl's UKI, as shipped: it holds what the menu needs
to find the disks and read the ESP and /boot, and nothing that no program in
it uses (see the "nmbl" dracut module)."""

import os
import re
import subprocess
import tempfile

from fixture import build_path, initramfs_cpio, kver

# nmbl's init, the menu, the libnmbl command and the console splitter.
PROGRAMS = ["init", "usr/libexec/nmbl/grub-emu", "usr/bin/nmbl",
            "usr/libexec/nmbl/nmbl-console"]
# nmbl-init loads the drivers and makes the /dev/disk links itself: none of
# dracut's shell init and udev, which took most of the time before the menu.
# And no shell at all: under Secure Boot it would be more than GRUB gives
# (only a debug build, make NMBL_SHELL=1, has one).
ABSENT = ["usr/lib/udev", "usr/bin/udevadm", "usr/lib/systemd",
          "usr/bin/bash", "usr/lib/dracut-lib.sh", "usr/bin/loginctl",
          "usr/bin/sh", "usr/bin/dash", "bin/sh", "usr/bin/busybox"]
# Disk controllers a firmware boots from, the file systems of ESPs, /boot
# and the roots a direct boot mounts, and what a USB keyboard needs.
MODULES = ["virtio_blk", "virtio_scsi", "ahci", "nvme", "sd_mod", "usb-storage", "uas",
           "mmc_block", "vfat", "ext4", "xfs", "btrfs", "efivarfs",
           "xhci-pci", "ehci-pci", "ohci-pci", "uhci-hcd", "usbhid", "hid-generic"]
# Loaded by the C library itself, never named by a program.
DLOPENED = re.compile(r"^(libnss_.*|libgcc_s)\.so")


def unpack(tree):
    section = os.path.join(tree, "initrd")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.initrd",
                    build_path("nmbl.efi"), section], check=True)
    root = os.path.join(tree, "root")
    os.mkdir(root)
    with open(section, "rb") as f:
        archive = initramfs_cpio(f.read())
    subprocess.run(["cpio", "-id", "--quiet"], input=archive, cwd=root, check=True)
    return root


def dynamic(path):
    """(DT_NEEDED names, DT_SONAME or None) of an ELF file, or None if it is not one."""
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return None
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    soname = re.search(r"\(SONAME\)\s+Library soname: \[([^]]+)\]", out)
    return (re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", out),
            soname.group(1) if soname else None)


def test_initramfs_has_what_the_menu_needs_and_no_dead_weight():
    with tempfile.TemporaryDirectory(dir=build_path("test")) as tree:
        root = unpack(tree)
        for p in PROGRAMS:
            assert os.path.isfile(os.path.join(root, p)), f"{p} missing from the initramfs"
        mods = {os.path.splitext(n)[0] for _, _, names in
                os.walk(os.path.join(root, "usr/lib/modules", kver())) for n in names
                if n.endswith(".ko")}
        assert not set(MODULES) - mods, f"modules missing: {sorted(set(MODULES) - mods)}"
        present = [p for p in ABSENT if os.path.lexists(os.path.join(root, p))]
        assert not present, f"not for a boot menu: {present}"
        hooks = [n for _, _, names in os.walk(os.path.join(root, "usr/lib/dracut/hooks"))
                 for n in names]
        assert not hooks, f"dracut hooks, which nothing runs: {hooks}"
        with open(os.path.join(root, "init"), "rb") as f:
            assert b"nmbl-init: " in f.read(), "/init is not nmbl-init"

        wanted, sonames = set(), set()
        for top, _, names in os.walk(root):
            for n in names:
                path = os.path.join(top, n)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                elf = dynamic(path)
                if elf is None:
                    continue
                wanted.update(elf[0])
                if elf[1]:
                    sonames.add(elf[1])
        missing = wanted - sonames
        assert not missing, f"needed but not in the initramfs: {sorted(missing)}"
        unused = {s for s in sonames - wanted if not DLOPENED.match(s)}
        assert not unused, f"libraries nothing in the initramfs uses: {sorted(unused)}"
