# SPDX-License-Identifier: GPL-3.0-or-later
"""A Debian machine whose kernels are UKIs only: systemd's kernel-install
with layout=uki put them in /EFI/Linux on the ESP, named by the entry token
(the machine id) and the kernel version, each with the machine's
os-release as .osrel and /etc/kernel/cmdline as .cmdline; /boot has no
vmlinuz, so grub-mkconfig's 10_linux lists nothing.  GRUB 2.14's
grub-mkconfig has no script that calls uki (its 25_bli only loads bli):
the user added one, /etc/grub.d/09_uki, with the two lines GRUB's manual
asks for, "insmod blsuki" and "uki", before 10_linux so that the newest
UKI is the default.  The rest of grub.cfg is grub-mkconfig's, the ESP has
Debian's stub.

GRUB 2.14's uki lists the UKIs of the ESP newest first (gnulib's
filevercmp of the file names), each with the file name as its id and
PRETTY_NAME of its .osrel as its title; nmbl boots one with linux rather
than chainloader, with its .cmdline as the options."""

import functools
import os
import subprocess
import tempfile

import menu
import test_debian

RU = "3c1d9e2a-5b47-4e86-a0f3-91d2c7b8e4a6"
MACHINE_ID = "d41e7c0a9b6f4e2d8c3a5b1f0e9d7c6b"
NEW, OLD = f"{MACHINE_ID}-6.12.12-amd64.efi", f"{MACHINE_ID}-6.12.9-amd64.efi"
# A UKI made by hand, whose .osrel has no PRETTY_NAME.
CUSTOM = "custom-rescue.efi"
OSREL = """PRETTY_NAME="Debian GNU/Linux forky/sid"
NAME="Debian GNU/Linux"
VERSION_CODENAME=forky
ID=debian
"""
CMDLINE = f"root=UUID={RU} ro quiet"
TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
STUB = os.environ.get("UKI_STUB", "/usr/lib/systemd/boot/efi/linuxx64.efi.stub")


def make_uki(out, osrel, cmdline):
    """A UKI made as nmbl's own is, around a .linux that is no kernel:
    listing reads the .osrel and .cmdline and that there is a .linux."""
    with tempfile.TemporaryDirectory() as tmp:
        files = {"linux": "not a kernel\n", "initrd": "not an initrd\n", "osrel": osrel}
        for name, text in files.items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        subprocess.run([os.path.join(TOP, "dracut", "mkuki"), STUB,
                        os.path.join(tmp, "linux"), os.path.join(tmp, "initrd"), cmdline,
                        os.path.join(tmp, "osrel"), os.path.join(TOP, "dracut", "sbat.csv"),
                        out], check=True)


def image(name):
    case = menu.variant("debian-uki", name)
    linux = os.path.join(case, "esp", "EFI", "Linux")
    os.makedirs(linux)
    make_uki(os.path.join(linux, NEW), OSREL, CMDLINE)
    make_uki(os.path.join(linux, OLD), OSREL, CMDLINE)
    make_uki(os.path.join(linux, CUSTOM), "ID=custom\n", f"root=UUID={RU} ro single")
    path, _ = menu.disk(case, name, esp_volid="5A1C-0E2F", root_uuid=RU)
    return path


@functools.cache
def default_run():
    return menu.run(image("debian-uki-default"))


def test_uki_entries_newest_first_with_grub_s_ids_and_titles():
    result = default_run()
    assert set(result.errors) == test_debian.GRAPHICS_ERRORS, result.output
    assert [e[:3] for e in result.menus[0]["entries"]] == [
        ["menuentry", NEW, "Debian GNU/Linux forky/sid"],
        ["menuentry", OLD, "Debian GNU/Linux forky/sid"],
        ["menuentry", CUSTOM, CUSTOM],
        ["menuentry", "uefi-firmware", "UEFI Firmware Settings"],
    ], result.menus
    assert result.default_id() == NEW


def test_uki_default_boots_the_newest_with_linux_from_the_esp():
    result = default_run()
    assert result.kernel == f"(hd0,gpt1)/EFI/Linux/{NEW}", result.output
    assert result.initrds == [], result.output
    assert result.cmdline == f"BOOT_IMAGE=(hd0,gpt1)/EFI/Linux/{NEW} {CMDLINE}", result.output


def test_uki_older_one_chosen():
    result = menu.run(image("debian-uki-older"), request=OLD)
    assert result.default_id() == OLD, result.menus
    assert result.kernel == f"(hd0,gpt1)/EFI/Linux/{OLD}", result.output
    assert result.cmdline == f"BOOT_IMAGE=(hd0,gpt1)/EFI/Linux/{OLD} {CMDLINE}", result.output
