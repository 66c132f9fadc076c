# SPDX-License-Identifier: GPL-3.0-or-later
"""What the VM tests share: the build's outputs and disks made from them."""

import functools
import os
import shutil
import sys

BUILD = os.environ.get("NMBL_BUILD", "build")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm"))

import mkdisk  # noqa: E402
from vm import VM  # noqa: E402,F401  (re-exported for the tests)

# Fixed ids, so that a grub.cfg can name the file systems before they exist
# (the Makefile names ROOT_UUID too, in the target UKI's command line).
BOOT_UUID = "5e1f0c1a-7b2d-4c3e-9f40-b0070b0070b0"
ESP_PARTUUID = "e5b0e5b0-1111-4222-8333-e5b0e5b0e5b0"
ROOT_UUID = "7a46e7a1-0d5c-4a8b-8d1e-2007f5007f50"

# What the menu shows once grub-emu has drawn it and started counting down.
MENU_READY = r"executed automatically in"
# The target's init: "NMBL-TARGET-UP release=<uname -r> cmdline=<cmdline>".
# Up to the end of the line: the console may have delivered half of it yet.
TARGET_UP = r"NMBL-TARGET-UP release=(\S+) cmdline=([^\r\n]*)\r?\n"


def build_path(*parts):
    return os.path.join(BUILD, *parts)


@functools.cache
def kver():
    with open(build_path("kernel", "kver")) as f:
        return f.read().strip()


def workdir(name):
    path = build_path("test", name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def make_disk(name, grub_cfg, boot_files, uki="nmbl.efi"):
    """A disk as a Debian install with a separate /boot has it: the nmbl UKI
    (UKI, below the build directory) as the ESP's default loader, /boot with
    grub/grub.cfg and the kernels, and the target's root file system.
    BOOT_FILES maps a name in /boot to the build file to copy there.
    Returns the image's path."""
    top = workdir(name)
    esp = os.path.join(top, "esp")
    boot = os.path.join(top, "boot")
    os.makedirs(os.path.join(esp, "EFI", "BOOT"))
    os.makedirs(os.path.join(boot, "grub"))
    shutil.copy(build_path(uki), os.path.join(esp, "EFI", "BOOT", "BOOTX64.EFI"))
    for dest, src in boot_files.items():
        shutil.copy(src, os.path.join(boot, dest))
    with open(os.path.join(boot, "grub", "grub.cfg"), "w") as f:
        f.write(grub_cfg)
    image = os.path.join(top, "disk.img")
    mkdisk.build(image, esp=esp, boot=boot, root=build_path("test", "target-root"),
                 boot_uuid=BOOT_UUID, root_uuid=ROOT_UUID, esp_partuuid=ESP_PARTUUID)
    return image
