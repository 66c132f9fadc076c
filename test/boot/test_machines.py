# SPDX-License-Identifier: GPL-3.0-or-later
"""Machines unlike the tests' usual one (q35, QEMU's "max" CPU, one virtio
disk with GPT, a serial console): each boots through nmbl's menu into the
target, with the entry's command line."""

import functools
import os
import subprocess
import tempfile
import time

import mkdisk
import test_kexec
from fixture import (BOOT_TIMEOUT, BOOT_UUID, ESP_PARTUUID, ESP_VOLID, MENU_READY, ROOT_UUID,
                     TARGET_UP, VM, build_path, debian_stub, entry, expected_cmdline, kver,
                     make_disk)
from vm import KEY_ENTER, KEY_HOME

# What the screen of a menu shows (read back from QEMU's screendump): the
# title GRUB draws, and an entry that is not highlighted (OCR loses the
# highlighted one's inverted colours).
MENU_ON_SCREEN = ("GNU GRUB", "second entry")


def boot_default(name, disk=None, screen=False, **machine):
    """Test_kexec's machine (or DISK), changed as MACHINE says (VM's
    arguments): the default entry, taken with Enter once the menu is up
    (test_kexec waits for its timeout); the target's line.  SCREEN: the
    menu is on the screen too (a key on the serial line stops the
    countdown while the screen is read)."""
    with VM(disk or test_kexec.disk(), snapshot=True, qmp=screen,
            log_file=build_path("test", f"machine-{name}.log"), **machine) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        if screen:
            vm.send(KEY_HOME)
            wait_for_screen(vm, MENU_ON_SCREEN, timeout=60)
        vm.send(KEY_ENTER)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
    return up


def screen_text(vm):
    """What the machine's screen says, as OCR reads QEMU's screendump."""
    with tempfile.TemporaryDirectory(prefix="nmbl-screen-") as tmp:
        shot = os.path.join(tmp, "screen.ppm")
        vm.screendump(shot)
        p = subprocess.run(["tesseract", shot, "-"], capture_output=True, text=True,
                           env=dict(os.environ, OMP_THREAD_LIMIT="1"))
    assert p.returncode == 0, f"tesseract failed: {p.stderr}"
    return p.stdout


def wait_for_screen(vm, texts, timeout):
    """Until the screen shows every one of TEXTS; what it showed last if not."""
    deadline = time.monotonic() + timeout
    while True:
        shown = screen_text(vm)
        if all(t in shown for t in texts):
            return shown
        assert time.monotonic() < deadline, \
            f"the screen does not show {texts} after {timeout} s; it shows:\n{shown}"


def first_entry_cmdline():
    """What the target's command line must be: the default entry's."""
    return expected_cmdline(f"/vmlinuz-{kver()}", "nmbl.entry=first")


def test_older_cpu_without_avx_two_vcpus_256_mib_boots():
    """A named older model (Nehalem: SSE4.2, no AVX) with two vCPUs, and
    the smallest memory nmbl promises to boot in."""
    up = boot_default("nehalem-smp2-256m", cpu="Nehalem", memory=256, qemu_args=["-smp", "2"])
    assert up.group(2) == first_entry_cmdline(), up.group(2)


# --- disks: controllers, two disks, labels twice, MBR -------------------------

# Every file system on two disks has the same label: GRUB's search and the
# root= the target mounts name them by UUID.
LABELS = dict(esp_label="ESP", boot_label="boot", root_label="root")
DECOY_BOOT_UUID = "dec0dec0-b007-4b00-8b00-dec0dec0b007"
DECOY_ROOT_UUID = "dec0dec0-2007-4200-8200-dec0dec02007"


def target_boot_files():
    """The target's kernel and its dracut initramfs, whose udev loads the
    driver of whatever disk controller and console the machine has (the
    quick one knows a virtio disk only)."""
    k = kver()
    return {f"vmlinuz-{k}": build_path("test", "vmlinuz-test"),
            f"initrd.img-{k}": build_path("test", "target-initrd-machines.img")}


@functools.cache
def controller_disk():
    """Test_kexec's system, booting the target with its dracut initramfs."""
    return make_disk("machine-controller", test_kexec.grub_cfg(),
                     dict(test_kexec.boot_files(), **target_boot_files()))


@functools.cache
def split_disks():
    """Test_kexec's system on two disks, the ESP alone on the first, /boot
    and root on the second; and a third, another system's, whose file
    systems have the same labels (its own ESP, stub, /boot and grub.cfg,
    each with its own UUID)."""
    make_disk("machine-split", test_kexec.grub_cfg(),
              dict(test_kexec.boot_files(), **target_boot_files()),
              esp_files={"EFI/debian/grub.cfg": debian_stub("machine-split", hint="hd0,gpt2")}, **LABELS)
    top = build_path("test", "machine-split")
    esp, system = os.path.join(top, "esp.img"), os.path.join(top, "system.img")
    mkdisk.build(esp, esp=os.path.join(top, "esp"), esp_partuuid=ESP_PARTUUID,
                 esp_volid=ESP_VOLID, esp_label=LABELS["esp_label"])
    mkdisk.build(system, esp=None, boot=os.path.join(top, "boot"),
                 root=build_path("test", "target-root"), boot_uuid=BOOT_UUID,
                 root_uuid=ROOT_UUID, boot_label=LABELS["boot_label"],
                 root_label=LABELS["root_label"])
    cfg = "set default=0\nset timeout=3\n\n" + entry(
        "Another system", f"/vmlinuz-{kver()}", "nmbl.entry=decoy").replace(
            BOOT_UUID, DECOY_BOOT_UUID).replace(ROOT_UUID, DECOY_ROOT_UUID)
    decoy = make_disk("machine-decoy", cfg, target_boot_files(),
                      esp_files={"EFI/debian/grub.cfg": debian_stub("machine-decoy", DECOY_BOOT_UUID, "hd0,gpt2")},
                      boot_uuid=DECOY_BOOT_UUID, root_uuid=DECOY_ROOT_UUID, esp_volid="DEC0-0001",
                      esp_partuuid="dec0dec0-e5b0-4e5b-8e5b-dec0dec0e5b0", **LABELS)
    return esp, system, decoy


@functools.cache
def mbr_disk():
    """Test_kexec's system on an MBR disk: the ESP is partition 1 of type
    0xEF, and grub.cfg names /boot (hd0,msdos2), as grub-mkconfig does."""
    k = kver()
    cfg = f"""set default=0
set timeout=3

menuentry 'Debian GNU/Linux' --class debian --class gnu-linux {{
	set root='hd0,msdos2'
	echo	'Loading Linux {k} ...'
	linux	($root)/vmlinuz-{k} root=UUID={ROOT_UUID} ro console=ttyS0,115200 nmbl.entry=mbr
	initrd	(hd0,msdos2)/initrd.img-{k}
}}
"""
    return make_disk("machine-mbr", cfg, target_boot_files(),
                     esp_files={"EFI/debian/grub.cfg": debian_stub("machine-mbr", hint="hd0,msdos2")},
                     table="mbr")


def test_virtio_scsi_esp_and_boot_on_two_disks_beside_same_labels():
    """The ESP on one virtio-scsi disk, /boot and root on another, and a
    third disk (virtio-blk) whose file systems carry the same labels: the
    system the firmware started nmbl from boots, found by its UUIDs."""
    esp, system, decoy = split_disks()
    up = boot_default("scsi-split", disk=esp, bus="scsi",
                      disks=[(system, "scsi"), (decoy, "virtio")])
    assert up.group(2) == first_entry_cmdline(), up.group(2)


def test_sata_disk_with_menu_on_screen_and_serial():
    """The disk on AHCI (q35's SATA controller); the menu on the screen as
    on the serial console."""
    up = boot_default("sata", disk=controller_disk(), bus="sata", screen=True)
    assert up.group(2) == first_entry_cmdline(), up.group(2)


def test_qemu64_cpu_and_an_nvme_disk_with_mbr():
    """libvirt's CPU for a machine made without --cpu: no SSE4.2, so
    crc32c-intel, the first module of ext4's soft dependency crypto-crc32c,
    cannot load; nmbl must go on to crc32c_generic to mount /boot.  Its disk
    an MBR disk on NVMe: the ESP has no partition UUID for the firmware to
    pass on (systemd-stub sets no LoaderDevicePartUUID), and grub.cfg names
    (hd0,msdos2)."""
    up = boot_default("qemu64-nvme-mbr", disk=mbr_disk(), bus="nvme", cpu="qemu64")
    k = kver()
    assert up.group(1) == k, up.group(1)
    want = (f"BOOT_IMAGE=(hd0,msdos2)/vmlinuz-{k} root=UUID={ROOT_UUID} ro "
            "console=ttyS0,115200 nmbl.entry=mbr")
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"


def test_amd_cpu_with_4_gib_serial_only_and_a_usb_stick_on_xhci():
    """An AMD model, and memory above 4 GiB's hole: the kernel and initrds
    wherever kexec_file_load puts them.  No display adapter at all: the
    serial line is the only console (the firmware has no screen to give
    the kernel, whose tty0 is then a dummy).  And the whole disk on a USB
    stick behind xHCI: Linux finds it only once the host controller's
    driver is loaded and the bus enumerated, after nmbl has begun to wait
    for the ESP."""
    up = boot_default("epyc-4g-serial-usb", disk=controller_disk(), bus="usb", cpu="EPYC",
                      memory=4608, qemu_args=["-vga", "none"])
    assert up.group(2) == first_entry_cmdline(), up.group(2)


# --- consoles ------------------------------------------------------------------

@functools.cache
def screen_disk():
    """Entries for a machine whose console is its screen: the target
    reports on its virtio console (console=tty0 first: with hvc0 alone,
    whose driver is a module, the target's initramfs starts without a
    console at all)."""
    k = kver()
    cfg = "set default=0\nset timeout=30\n\n"
    for title, extra in (("Debian GNU/Linux", "nmbl.entry=first"),
                         ("Debian GNU/Linux, second entry", "nmbl.entry=screen-keys")):
        cfg += entry(title, f"/vmlinuz-{k}", extra).replace(
            "console=ttyS0,115200", "console=tty0 console=hvc0")
    return make_disk("machine-screen", cfg, target_boot_files())


def test_screen_only_with_ps2_keyboard():
    """No serial port at all: the menu is on the screen, and keys typed on
    the PS/2 keyboard choose the second entry."""
    with VM(screen_disk(), snapshot=True, serial=False, qmp=True,
            log_file=build_path("test", "machine-screen.log")) as vm:
        wait_for_screen(vm, MENU_ON_SCREEN + ("executed automatically",), timeout=BOOT_TIMEOUT)
        vm.qmp().keys("down", "ret")
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
    want = (f"BOOT_IMAGE=/vmlinuz-{kver()} root=UUID={ROOT_UUID} ro console=tty0 console=hvc0 "
            "nmbl.entry=screen-keys")
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"
