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
# What each kind of machine needs nmbl's initramfs to hold (the modules
# with their dependencies), and what the distribution kernel builds in
# (its configuration).  test_machines boots the rows marked so.
MACHINE_NEEDS = {
    # test_machines and every other VM test
    "virtio-blk disk": ["virtio_pci", "virtio_blk"],
    "virtio-scsi disk": ["virtio_pci", "virtio_scsi", "sd_mod", "scsi_mod"],
    "SATA disk (AHCI)": ["ahci", "libahci", "libata", "sd_mod"],
    "NVMe disk": ["nvme", "nvme-core"],
    "USB stick on xHCI": ["xhci-pci", "xhci-hcd", "usbcore", "usb-storage", "uas", "sd_mod"],
    "ext4 on a CPU without SSE4.2 (qemu64)": ["ext4", "jbd2", "mbcache", "crc32c_generic"],
    "ext4 with SSE4.2": ["ext4", "crc32c-intel"],
    "ESP (FAT, its code pages), EFI variables": ["vfat", "fat", "nls_cp437", "nls_ascii",
                                                 "efivarfs"],
    "USB keyboard": ["xhci-pci", "usbhid", "hid-generic"],
    "QEMU's watchdog": ["i6300esb"],
    # not booted here
    "/boot or root on XFS (RHEL), btrfs (Fedora)": ["xfs", "btrfs"],
    "NVMe behind Intel VMD": ["vmd", "nvme"],
    "SD and eMMC": ["mmc_block", "sdhci-pci", "sdhci-acpi"],
    "older USB host controllers": ["ehci-pci", "ohci-pci", "uhci-hcd"],
    "Hyper-V virtual machine": ["hv_storvsc", "hyperv-keyboard", "hv_vmbus"],
    "VMware paravirtual SCSI": ["vmw_pvscsi"],
    "Intel, AMD and ACPI watchdogs": ["iTCO_wdt", "lpc_ich", "i2c-i801", "sp5100_tco",
                                      "wdat_wdt"],
}
BUILT_IN = {
    "GPT and MBR partition tables": ["CONFIG_EFI_PARTITION", "CONFIG_MSDOS_PARTITION"],
    "the menu on the screen": ["CONFIG_FB_EFI", "CONFIG_FRAMEBUFFER_CONSOLE", "CONFIG_VT"],
    "PS/2 keyboard": ["CONFIG_SERIO_I8042", "CONFIG_KEYBOARD_ATKBD"],
    "serial console": ["CONFIG_SERIAL_8250_CONSOLE"],
    "TPM (CRB, TIS)": ["CONFIG_TCG_CRB", "CONFIG_TCG_TIS"],
}
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


# What every start of nmbl reads, hashes under Secure Boot and unpacks:
# make bench's goal (its results.json has the figure).
UKI_BUDGET = 16 * 2**20


def test_uki_within_its_size_budget():
    size = os.path.getsize(build_path("nmbl.efi"))
    assert size <= UKI_BUDGET, f"nmbl's UKI is {size / 2**20:.2f} MiB, over 16 MiB"


def test_initramfs_has_what_the_menu_needs_and_no_dead_weight():
    with tempfile.TemporaryDirectory(dir=build_path("test")) as tree:
        root = unpack(tree)
        for p in PROGRAMS:
            assert os.path.isfile(os.path.join(root, p)), f"{p} missing from the initramfs"
        files = [n for _, _, names in os.walk(os.path.join(root, "usr/lib/modules", kver()))
                 for n in names if ".ko" in n]
        # Each compressed on its own: the kernel keeps the image unpacked
        # in memory as long as it runs (run-dracut).
        plain = [n for n in files if not n.endswith((".ko.zst", ".ko.xz"))]
        assert not plain, f"modules not compressed: {plain}"
        mods = {n.split(".ko")[0] for n in files}
        missing = {machine: sorted(set(need) - mods)
                   for machine, need in MACHINE_NEEDS.items() if set(need) - mods}
        assert not missing, f"modules missing, by the machine that needs them: {missing}"
        with open(build_path("kernel", "tree", "boot", f"config-{kver()}")) as f:
            config = f.read()
        missing = {machine: [o for o in options if not re.search(f"^{o}=y$", config, re.M)]
                   for machine, options in BUILT_IN.items()}
        missing = {machine: options for machine, options in missing.items() if options}
        assert not missing, f"not built into the kernel: {missing}"
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
