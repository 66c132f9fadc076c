# SPDX-License-Identifier: GPL-3.0-or-later
"""Direct boot in Secure Boot VMs: an entry of nmbl's own kernel boots by
switching root, without a second kernel start; an entry whose kernel
parameters differ, another kernel, or nmbl told so, boots by kexec.

Whether a second kernel started is told by the kernel itself: its boot id
(nmbl's status prints it, the target's init too) and its log (a kernel
booted by kexec starts a new one, without nmbl's lines)."""

import functools
import os
import re
import subprocess
import tempfile

from fixture import (AT_MENU, BOOT_TIMEOUT, BOOT_UUID, MENU_READY, NMBL_BOOT_ID, ROOT_UUID,
                     TARGET_KERNEL, TARGET_UP, VM, build_path, kver, make_disk, words)
from vm import KEY_DOWN, KEY_ENTER, KEY_HOME, Qmp

# nmbl's own kernel parameters (the UKI's command line, NMBL_CMDLINE in
# dracut/uki.mk): an entry that keeps them may switch root.
CONSOLES = "console=tty0 console=ttyS0,115200"
ROOT_LABEL = "nmbl-test-root"
ROOT_PARTUUID = "7a46e7a1-3333-4444-8555-2007f5007f50"
NO_SUCH_UUID = "0badc0de-0000-4000-8000-000000000000"

# BLS entries, newest first as blscfg sorts them: (file version, title,
# kernel, initrd, options).
ENTRIES = [
    ("9", "Direct", "vmlinuz-test", "initrd.img-test",
     f"root=UUID={ROOT_UUID} ro {CONSOLES} quiet rhgb systemd.unit=multi-user.target "
     "nmbl.entry=direct"),
    ("8", "Kernel parameter", "vmlinuz-test", "initrd.img-test",
     f"root=UUID={ROOT_UUID} ro {CONSOLES} mitigations=off nmbl.entry=mitigations"),
    ("7", "Other kernel", "vmlinuz-other", "initrd.img-other",
     f"root=UUID={ROOT_UUID} ro {CONSOLES} nmbl.entry=other"),
    ("6", "By label", "vmlinuz-test", "initrd.img-test",
     f"root=LABEL={ROOT_LABEL} rw {CONSOLES} nmbl.entry=label"),
    ("5", "By partition UUID", "vmlinuz-test", "initrd.img-test",
     f"root=PARTUUID={ROOT_PARTUUID} ro {CONSOLES} nmbl.entry=partuuid"),
    ("4", "Wrong root", "vmlinuz-test", "initrd.img-test",
     f"root=UUID={NO_SUCH_UUID} ro {CONSOLES} nmbl.entry=wrong"),
    # nmbl's own kernel as Debian signed it, a key the test machine's db
    # lacks: the running kernel, but one a kexec would refuse.
    ("3", "Untrusted copy", "vmlinuz-debian", "initrd.img-test",
     f"root=UUID={ROOT_UUID} ro {CONSOLES} nmbl.entry=untrusted"),
    # A root its initrd sets up (rd.lvm.lv=): nmbl boots through that
    # initrd, which must be whole, and for the running kernel.
    ("2", "Stacked, initrd cut short", "vmlinuz-test", "initrd.img-cut",
     f"root=UUID={ROOT_UUID} ro {CONSOLES} rd.lvm.lv=vg/root nmbl.entry=cut"),
    ("1", "Stacked, initrd of no kernel", "vmlinuz-test", "initrd.img-test",
     f"root=UUID={ROOT_UUID} ro {CONSOLES} rd.lvm.lv=vg/root nmbl.entry=nomodules"),
]


def grub_cfg():
    return f"""set timeout=3
search --no-floppy --fs-uuid --set=root {BOOT_UUID}
blscfg
"""


def cut_initrd(directory):
    """The target's initrd, its second half gone."""
    with open(build_path("test", "target-initrd.img"), "rb") as f:
        data = f.read()
    path = f"{directory}/initrd.img-cut"
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    return path


def bls_files(entries, directory):
    files = {
        "vmlinuz-test": build_path("test", "vmlinuz-test"),
        "initrd.img-test": build_path("test", "target-initrd.img"),
        "initrd.img-cut": cut_initrd(directory),
        "vmlinuz-other": build_path("test", "vmlinuz-other"),
        "initrd.img-other": build_path("test", "other-initrd.img"),
        "vmlinuz-debian": build_path("kernel", "tree", "boot", f"vmlinuz-{kver()}"),
    }
    for version, title, kernel, initrd, options in entries:
        path = f"{directory}/{version}.conf"
        with open(path, "w") as f:
            f.write(f"title {title}\nversion {version}\nlinux /{kernel}\ninitrd /{initrd}\n"
                    f"options {options}\n")
        files[f"loader/entries/{version}.conf"] = path
    return files


def src_dir(name):
    path = build_path("test", name)
    os.makedirs(path, exist_ok=True)
    return path


@functools.cache
def disk():
    return make_disk("direct", grub_cfg(), bls_files(ENTRIES, src_dir("direct-src")),
                     root_label=ROOT_LABEL, root_partuuid=ROOT_PARTUUID)


def choose(index):
    return KEY_HOME + KEY_DOWN * index + KEY_ENTER


def boot(name, keys=None, image=None):
    """Boot, choose with KEYS, and return the console log, the target's
    report line and nmbl's boot id."""
    with VM(image or disk(), snapshot=True, log_file=build_path("test", f"{name}.log"),
            **AT_MENU) as vm:
        nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        if keys:
            vm.send(keys)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
        return vm.clean_log(), up, nmbl_id


def bls_cmdline(index, entries=ENTRIES):
    """blscfg names the kernel with $root, as Fedora's GRUB does."""
    _, _, kernel, _, options = entries[index]
    return f"BOOT_IMAGE=(hd0,gpt2)/{kernel} {options}"


def assert_direct(log, up, nmbl_id, index):
    assert up.group(1) == kver(), f"target runs {up.group(1)}, expected {kver()}"
    want = bls_cmdline(index)
    assert up.group(2) == want, f"target's /proc/cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"
    kernel = re.search(TARGET_KERNEL, log)
    assert kernel, "the target did not report its kernel"
    assert kernel.group(1) == nmbl_id, \
        f"boot id {kernel.group(1)} is not nmbl's {nmbl_id}: a second kernel started"
    assert kernel.group(2) == "1", f"the kernel log shows {kernel.group(2)} kernel starts"
    assert int(kernel.group(3)) >= 1, "the target's kernel log lacks nmbl's lines"
    assert "Booting by kexec" not in log, "nmbl kexec'd an entry it could switch root to"


def assert_kexec(log, up, nmbl_id, release, reason):
    assert up.group(1) == release, f"target runs {up.group(1)}, expected {release}"
    assert re.search(r"Booting by kexec \S+:\s+" + words(reason), log), \
        f"nmbl did not say: {reason}"
    kernel = re.search(TARGET_KERNEL, log)
    assert kernel, "the target did not report its kernel"
    assert kernel.group(1) != nmbl_id, "the target kept nmbl's boot id: no kexec happened"
    assert kernel.group(3) == "0", "the kexec'd kernel's log holds nmbl's lines"


def back_to_the_menu(vm):
    vm.wait_for("Press any key to continue", timeout=60, clean=True)
    vm.send(KEY_ENTER)
    vm.wait_for("Use the .* keys to select which entry is highlighted", timeout=60, clean=True)


def test_wrong_root_says_so_then_own_kernel_boots_directly():
    """nmbl's own kernel signed by a key the machine does not trust is
    refused as a kexec would refuse it, though it is the running kernel.
    A root that is not there, or a root that its initrd sets up from an
    initrd cut short: a clear message and the menu again.  Then
    the default entry, nmbl's own kernel with userspace parameters of its
    own (rhgb, systemd.unit=, nmbl.entry=) and the same kernel ones, boots
    by switching root: one kernel start, its command line in /proc/cmdline."""
    with VM(disk(), snapshot=True, log_file=build_path("test", "direct-default.log"),
            **AT_MENU) as vm:
        nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        vm.send(choose(6))
        vm.wait_for(words("cannot load (hd0,gpt2)/vmlinuz-debian: the kernel is signed by a "
                          "key this machine does not trust"), timeout=BOOT_TIMEOUT, clean=True)
        back_to_the_menu(vm)
        vm.send(choose(5))
        vm.wait_for(words(f"cannot mount the root file system root=UUID={NO_SUCH_UUID}: "
                          "no such disk or partition is known to Linux"),
                    timeout=BOOT_TIMEOUT, clean=True)
        back_to_the_menu(vm)
        vm.send(choose(7))
        vm.wait_for(words("cannot start (hd0,gpt2)/vmlinuz-test with its initrd: an initrd is "
                          "not one the kernel would unpack (malformed or truncated)"),
                    timeout=BOOT_TIMEOUT, clean=True)
        back_to_the_menu(vm)
        vm.send(choose(0))
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
        log = vm.clean_log()
    assert_direct(log, up, nmbl_id, 0)


def test_kernel_only_parameter_differs_boots_by_kexec():
    log, up, nmbl_id = boot("direct-mitigations", choose(1))
    assert_kexec(log, up, nmbl_id, kver(),
                 "its kernel parameter 'mitigations=off' is not the running kernel's.")
    assert up.group(2) == bls_cmdline(1)


def test_other_kernel_boots_by_kexec():
    with open(build_path("kernel-other", "kver")) as f:
        other = f.read().strip()
    log, up, nmbl_id = boot("direct-other", choose(2))
    assert_kexec(log, up, nmbl_id, other,
                 f"it is not the running kernel (it is {other}).")
    assert up.group(2) == bls_cmdline(2)


def test_stacked_root_with_another_kernels_initrd_boots_by_kexec():
    """A root its initrd sets up, on nmbl's kernel, and an initrd without
    that kernel's modules (the target's has none): not through it, but by
    kexec, which boots the kernel the initrd is for."""
    log, up, nmbl_id = boot("direct-nomodules", choose(8))
    assert_kexec(log, up, nmbl_id, kver(), "its initrd holds no modules of the running kernel.")
    assert up.group(2) == bls_cmdline(8)


def test_root_by_label_boots_directly():
    log, up, nmbl_id = boot("direct-label", choose(3))
    assert_direct(log, up, nmbl_id, 3)


def test_root_by_partuuid_boots_directly():
    log, up, nmbl_id = boot("direct-partuuid", choose(4))
    assert_direct(log, up, nmbl_id, 4)


def test_btrfs_root_subvolume_boots_directly():
    """Fedora's layout: / in the btrfs subvolume "root"."""
    entries = [("9", "Fedora on btrfs", "vmlinuz-test", "initrd.img-test",
                f"root=UUID={ROOT_UUID} ro rootflags=subvol=root {CONSOLES} rhgb quiet "
                "nmbl.entry=btrfs")]
    image = make_disk("direct-btrfs", grub_cfg(), bls_files(entries, src_dir("direct-btrfs-src")),
                      root_fstype="btrfs", root_subvol="root")
    log, up, nmbl_id = boot("direct-btrfs", image=image)
    want = bls_cmdline(0, entries)
    assert up.group(2) == want, f"target's /proc/cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"
    kernel = re.search(TARGET_KERNEL, log)
    assert kernel and kernel.group(1) == nmbl_id, "a second kernel started"


def test_nmbl_boot_kexec_always_kexecs():
    """nmbl.boot=kexec on the UKI's command line (make NMBL_BOOT=kexec)."""
    image = make_disk("direct-knob", grub_cfg(), bls_files(ENTRIES[:1], src_dir("direct-knob-src")),
                      uki="test/nmbl-kexec.efi")
    log, up, nmbl_id = boot("direct-knob", image=image)
    assert_kexec(log, up, nmbl_id, kver(),
                 "nmbl.boot=kexec asks for kexec always.")
    assert up.group(2) == bls_cmdline(0)


def test_usb_keyboard_drives_the_menu():
    """A PC whose only keyboard is on USB: its host controller's driver is
    loaded with the disks', the keyboard's own (usbhid) once the USB bus has
    found it, which the kernel says only by a uevent.  Keys typed on it
    stop the countdown and choose the entry."""
    with tempfile.TemporaryDirectory(prefix="nmbl-qmp-") as tmp:
        sock = os.path.join(tmp, "qmp")
        args = ["-device", "qemu-xhci,id=xhci", "-device", "usb-kbd,bus=xhci.0",
                "-qmp", f"unix:{sock},server=on,wait=off"]
        with VM(disk(), snapshot=True, qemu_args=args,
                log_file=build_path("test", "direct-usb-keyboard.log")) as vm:
            qmp = Qmp(sock, timeout=BOOT_TIMEOUT)
            try:
                nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
                vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
                qmp.keys("home", "down", "down", "down", "ret")
                up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
            finally:
                qmp.close()
            vm.wait_exit(timeout=60)
            log = vm.clean_log()
    assert_direct(log, up, nmbl_id, 3)


def test_hibernated_swap_without_resume_kexecs():
    """Debian keeps the resume device in its initrd, not on the command
    line: a second disk holding a hibernated system (a swap signature
    S1SUSPEND, as the kernel leaves it) makes nmbl kexec the entry with its
    own initrd, which resumes it, rather than switch root past it."""
    with tempfile.TemporaryDirectory(prefix="nmbl-swap-") as tmp:
        swap = os.path.join(tmp, "swap.img")
        with open(swap, "wb") as f:
            f.truncate(8 << 20)
        subprocess.run(["mkswap", "-q", swap], check=True, capture_output=True)
        with open(swap, "r+b") as f:
            f.seek(4096 - 10)
            f.write(b"S1SUSPEND\0")
        args = ["-drive", f"file={swap},format=raw,if=virtio,snapshot=on"]
        with VM(disk(), snapshot=True, qemu_args=args,
                log_file=build_path("test", "direct-hibernated.log")) as vm:
            nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
            up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
            vm.wait_exit(timeout=60)
            log = vm.clean_log()
    assert_kexec(log, up, nmbl_id, kver(),
                 "/dev/vdb holds a hibernated system, which its own initrd resumes.")
    assert up.group(2) == bls_cmdline(0)
