# SPDX-License-Identifier: GPL-3.0-or-later
"""The distributions' own grub.cfg files, from test/grub-cfg/, booted for
real in Secure Boot VMs: nmbl's menu shows them and kexecs the target
kernel (the test kernel under the distribution's file names) with the
command line GRUB would pass.  The options gain console=ttyS0,115200, as
on any machine with a serial console, so the target can report."""

import os
import subprocess

from fixture import (BOOT_TIMEOUT, BOOT_UUID, ESP_VOLID, MENU_READY, ROOT_UUID, TARGET_UP, VM,
                     build_path, kver, make_disk, workdir)
from vm import KEY_DOWN, KEY_ENTER, KEY_ESC

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "grub-cfg")
MENU_SHOWN = r"Use the .* keys to select which entry is highlighted"


def corpus_text(*path, **replace):
    with open(os.path.join(CORPUS, *path)) as f:
        text = f.read()
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


def write(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


# --- Fedora: ESP stub, /boot with grub2/, grubenv and BLS entries ----------

FEDORA_MID = "3f2a7c0e9b1d4e5f8a6b0c1d2e3f4a5b"
FEDORA_NEW, FEDORA_OLD = "6.5.12-300.fc39.x86_64", "6.5.6-300.fc39.x86_64"
FEDORA_OPTIONS = f"root=UUID={ROOT_UUID} ro console=ttyS0,115200"


def fedora_disk():
    uuids = {"2c9d4b1e-6f0a-4a8e-9d3c-1b7e5f2a8c40": BOOT_UUID, "4E2F-1A3B": ESP_VOLID}
    src = workdir("fedora-src")
    files = {
        "grub2/grub.cfg": write(src, "grub.cfg", corpus_text("fedora39", "boot", "grub2",
                                                             "grub.cfg", **uuids)),
        # The password of test/grub-cfg/rhel8 ("nmbl-test"), as grub2-setpassword writes it.
        "grub2/user.cfg": os.path.join(CORPUS, "rhel8", "boot", "grub2", "user.cfg"),
        f"vmlinuz-{kver()}": build_path("test", "vmlinuz-test"),
        f"initramfs-{kver()}.img": build_path("test", "target-initrd.img"),
    }
    for version, tag in ((FEDORA_NEW, "fedora-new"), (FEDORA_OLD, "fedora-old")):
        files[f"loader/entries/{FEDORA_MID}-{version}.conf"] = write(src, f"{version}.conf", f"""\
title Fedora Linux ({version}) 39 (Workstation Edition)
version {version}
linux /vmlinuz-{kver()}
initrd /initramfs-{kver()}.img
options {FEDORA_OPTIONS} nmbl.entry={tag}
grub_users $grub_users
grub_arg --unrestricted
grub_class fedora
""")
    # What grub2-set-default and grub2-reboot leave: the older kernel as the
    # saved default, the newer one for the next boot only.
    env = os.path.join(src, "grubenv")
    subprocess.run(["grub-editenv", env, "create"], check=True)
    subprocess.run(["grub-editenv", env, "set", f"saved_entry={FEDORA_MID}-{FEDORA_OLD}",
                    f"next_entry={FEDORA_MID}-{FEDORA_NEW}"], check=True)
    files["grub2/grubenv"] = env
    stub = write(src, "stub.cfg", corpus_text("fedora39", "esp", "EFI", "fedora", "grub.cfg",
                                              **uuids))
    return make_disk("layout-fedora", None, files, esp_files={"EFI/fedora/grub.cfg": stub})


def test_fedora_layout_password_editor_command_line_next_entry_saved_default():
    disk = fedora_disk()
    bls = f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{kver()} {FEDORA_OPTIONS}"
    # Not a snapshot: the second boot must see what the first one saved.
    with VM(disk, log_file=build_path("test", "layout-fedora-1.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        # Editing an entry needs the superuser's password: a wrong one is
        # refused and the menu stays; the right one opens the editor.
        vm.send("e")
        vm.wait_for("Enter username:", timeout=60, clean=True)
        vm.send("root" + KEY_ENTER)
        vm.wait_for("Enter password:", timeout=60, clean=True)
        vm.send("wrong" + KEY_ENTER)
        vm.wait_for(MENU_SHOWN, timeout=60, clean=True)
        assert "Minimum Emacs-like screen editing" not in vm.clean_log(), \
            "the editor opened without the password"
        vm.send("e")
        vm.wait_for("Enter username:", timeout=60, clean=True)
        vm.send("root" + KEY_ENTER)
        vm.wait_for("Enter password:", timeout=60, clean=True)
        vm.send("nmbl-test" + KEY_ENTER)
        vm.wait_for("Minimum Emacs-like screen editing", timeout=60, clean=True)
        vm.send(KEY_ESC)
        vm.wait_for(MENU_SHOWN, timeout=60, clean=True)
        # GRUB's command line: the superuser has logged in for this boot, so
        # GRUB does not ask again; what it runs is GRUB's.
        vm.send("c")
        vm.wait_for("grub>", timeout=60, clean=True)
        vm.send("echo platform=$grub_platform" + KEY_ENTER)
        vm.wait_for("platform=efi", timeout=60, clean=True)
        vm.send(KEY_ESC)
        vm.wait_for(MENU_SHOWN, timeout=60, clean=True)
        # The highlighted entry is the default: grub2-reboot's next_entry.
        vm.send(KEY_ENTER)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
    assert up.group(2) == f"{bls} nmbl.entry=fedora-new", up.group(2)
    # next_entry was spent (save_env wrote it empty): the saved default now.
    with VM(disk, log_file=build_path("test", "layout-fedora-2.log")) as vm:
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
        log = vm.clean_log()
    assert up.group(2) == f"{bls} nmbl.entry=fedora-old", up.group(2)
    assert f"NMBL-TARGET-EFIVAR LoaderEntrySelected={FEDORA_MID}-{FEDORA_OLD}" in log


# --- Debian: ESP stub, /boot a directory of root ----------------------------

DEBIAN_NEW, DEBIAN_OLD = "6.1.0-13-amd64", "6.1.0-12-amd64"


def debian_disk():
    cfg = corpus_text("debian12", "root", "boot", "grub", "grub.cfg",
                      **{"6d5f3a1b-8c2e-4f70-9a1d-2b3c4d5e6f70": ROOT_UUID,
                         "4E2F-1A3B": ESP_VOLID,
                         " ro ": " ro console=ttyS0,115200 "})
    stub = corpus_text("debian12", "esp", "EFI", "debian", "grub.cfg",
                       **{"6d5f3a1b-8c2e-4f70-9a1d-2b3c4d5e6f70": ROOT_UUID})
    src = workdir("debian-src")
    files = {"grub/grub.cfg": write(src, "grub.cfg", cfg)}
    for version in (DEBIAN_NEW, DEBIAN_OLD):
        files[f"vmlinuz-{version}"] = build_path("test", "vmlinuz-test")
        files[f"initrd.img-{version}"] = build_path("test", "target-initrd.img")
    return make_disk("layout-debian", None, files, separate_boot=False,
                     esp_files={"EFI/debian/grub.cfg": write(src, "stub.cfg", stub)})


def test_debian_layout_recovery_entry_from_the_submenu():
    with VM(debian_disk(), snapshot=True, log_file=build_path("test", "layout-debian.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        vm.send(KEY_DOWN + KEY_ENTER)
        vm.wait_for("Debian GNU/Linux, with Linux 6.1.0-12-amd64 \\(recovery mode\\)",
                    timeout=60, clean=True)
        vm.send(KEY_DOWN * 3 + KEY_ENTER)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
    assert up.group(1) == kver()
    assert up.group(2) == (f"BOOT_IMAGE=/boot/vmlinuz-{DEBIAN_OLD} root=UUID={ROOT_UUID} ro "
                           "console=ttyS0,115200 single"), up.group(2)
