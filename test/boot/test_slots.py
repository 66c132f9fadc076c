# SPDX-License-Identifier: GPL-3.0-or-later
"""nmbl's own A/B slots, with the firmware as the fallback mechanism.

A machine that boots the nmbl UKI from the ESP's default path gets new
nmbl UKIs the way its package gives them: "nmbl bootcfg install" in the
running system (the target), "nmbl bootcfg bless" once it is up (what
nmbl-bless.service runs), "nmbl bootcfg remove" on erase.  The firmware's
variable store persists from one boot to the next (each boot is one QEMU
run: a reset ends QEMU, the next run is the next start of the firmware),
and so does the disk.  What each boot came from is what nmbl prints before
its menu: the Boot#### the firmware started ("boot-current")."""

import os
import re
import subprocess

from fixture import (BOOT_TIMEOUT, MENU_READY, TARGET_UP, VM, build_path, entry, kver,
                     make_disk)
from vm import KEY_DOWN, KEY_ENTER
import mkdisk

CURRENT = r'nmbl: boot-current: Boot([0-9A-F]{4}) "([^"]*)"'
BOOTCFG = r"NMBL-TARGET-BOOTCFG ([\w-]+) exit=(\d+)\r?\n"
BOOTORDER = r"NMBL-TARGET-BOOTORDER order=(\S+) next=(\S+)\r?\n"
SLOT_STATE = r"slot ([ab]): (\w+)"
# The ESP's own drivers for the target, and what it does there.
ESP_DRIVERS = "rd.driver.pre=vfat,nls_cp437,nls_ascii"
# Room for nmbl's default UKI, the new ones to install and both slots.
ESP_MIB = 200

# The menu, in order: what the package and the bless unit would run (in one
# boot, the bless unit first, then what the user does in that system).
ACTIONS = [
    ("Bless", "bless,status"),
    ("Install next", "install:/efi/new/next.efi,status"),
    ("Install panic", "install:/efi/new/panic.efi,status"),
    ("Bless, install unsigned", "bless,status,install:/efi/new/unsigned.efi"),
    ("Install other", "install:/efi/new/other.efi,status"),
    ("Bless, remove", "bless,remove,status"),
]


def grub_cfg(menu=ACTIONS):
    text = "set timeout=600\n\n"
    for title, actions in menu:
        text += entry(title, f"/vmlinuz-{kver()}", f"{ESP_DRIVERS} nmbl.test-bootcfg={actions}")
    return text


def make_machine(name):
    """A disk whose ESP boots nmbl from its default path and holds the new
    UKIs to install, and a variable store of its own."""
    image = make_disk(name, grub_cfg(), {
        f"vmlinuz-{kver()}": build_path("test", "vmlinuz-test"),
        f"initrd.img-{kver()}": build_path("test", "target-initrd.img")},
        esp_files={"new/next.efi": build_path("test", "nmbl-kexec.efi"),
                   "new/panic.efi": build_path("test", "nmbl-noinit.efi"),
                   "new/unsigned.efi": build_path("test", "nmbl-unsigned.efi"),
                   "new/other.efi": build_path("nmbl.efi")},
        esp_size=ESP_MIB)
    vars_file = os.path.join(os.path.dirname(image), "vars.fd")
    return image, vars_file


class Boot:
    """One start of the machine, up to the target's power-off.  MENU is
    grub.cfg's, (title, actions) pairs."""

    def __init__(self, image, vars_file, name, menu=ACTIONS, log="slots"):
        self.menu = menu
        self.vm = VM(image, vars_file=vars_file,
                     log_file=build_path("test", f"{log}-{name}.log"))

    def __enter__(self):
        self.vm.start()
        return self

    def __exit__(self, *exc):
        self.vm.kill()

    def current(self):
        """The Boot#### nmbl was started as, and its description."""
        m = self.vm.wait_for(CURRENT, timeout=BOOT_TIMEOUT, clean=True)
        return m.group(1), m.group(2)

    def select(self, title):
        """Boot the menu's entry TITLE, up to the target's start; its index."""
        self.vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        index = [t for t, _ in self.menu].index(title)
        self.vm.send(KEY_DOWN * index + KEY_ENTER)
        self.vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        return index

    def choose(self, title):
        """Boot the menu's entry TITLE; what each action said, by name:
        (exit status, BootOrder, BootNext, the text the command printed)."""
        index = self.select(title)
        results = {}
        for _ in self.menu[index][1].split(","):
            start = len(self.vm.clean_log())
            m = self.vm.wait_for(BOOTCFG, timeout=BOOT_TIMEOUT, clean=True)
            said = self.vm.clean_log()[start:m.start()]
            order = self.vm.wait_for(BOOTORDER, timeout=60, clean=True)
            results[m.group(1)] = (int(m.group(2)), order.group(1), order.group(2), said)
        self.vm.wait_exit(timeout=60)
        return results


def boot_slot_a(image, vars_file, name, slot_a, title):
    """A start that must come from slot a, booting the menu's entry TITLE."""
    with Boot(image, vars_file, name) as b:
        assert b.current() == (slot_a, "nmbl (slot a)")
        return b.choose(title)


def fsck_esp(image):
    """What the machine's own start does with its ESP before mounting it
    (fstab's pass number: systemd-fsck runs fsck.vfat -a): FAT keeps no
    journal, and a power cut leaves its allocation table to be mended."""
    esp = f"{image}.esp"
    size = ESP_MIB * 1024 * 1024
    with open(image, "rb") as f:
        f.seek(mkdisk.ALIGN)
        with open(esp, "wb") as out:
            out.write(f.read(size))
    fsck = subprocess.run(["fsck.vfat", "-a", "-w", esp], capture_output=True, text=True)
    assert fsck.returncode in (0, 1), f"fsck.vfat:\n{fsck.stdout}{fsck.stderr}"
    with open(esp, "rb") as f, open(image, "r+b") as out:
        out.seek(mkdisk.ALIGN)
        out.write(f.read())
    os.unlink(esp)


def slot_states(said):
    return dict(re.findall(SLOT_STATE, said))


def test_new_nmbl_is_tried_once_then_blessed_or_left_behind_and_removed():
    image, vars_file = make_machine("slots")
    # The machine as it is before nmbl's package: the firmware starts the
    # ESP's default path.  A new UKI is offered once.
    with Boot(image, vars_file, "1-install") as b:
        first, first_name = b.current()
        r = b.choose("Install next")
    code, order, next_, said = r["install"]
    assert code == 0, f"install failed:\n{said}"
    assert "is in slot a" in said, said
    found_order = order
    slot_a = next_
    assert slot_a != "-" and slot_a not in order.split(","), \
        f"BootNext {next_} must name a new option, BootOrder ({order}) must not"
    assert slot_states(r["status"][3]) == {"a": "trial", "b": "empty"}, r["status"][3]

    # The firmware takes BootNext: slot a runs, and is blessed by the system
    # it booted.
    r = boot_slot_a(image, vars_file, "2-bless", slot_a, "Bless")
    code, order, next_, said = r["bless"]
    assert code == 0 and "slot a booted this system" in said, said
    assert order == f"{slot_a},{found_order}" and next_ == "-", (order, next_)
    assert slot_states(r["status"][3]) == {"a": "good", "b": "empty"}, r["status"][3]

    # From now on BootOrder starts slot a.  A new nmbl whose kernel panics:
    r = boot_slot_a(image, vars_file, "3-install-panic", slot_a, "Install panic")
    code, order, slot_b, said = r["install"]
    assert code == 0 and "is in slot b" in said, said
    assert order == f"{slot_a},{found_order}", order
    with Boot(image, vars_file, "4-panic") as b:
        b.vm.wait_for(r"Kernel panic", timeout=BOOT_TIMEOUT, clean=True)
        b.vm.wait_for(r"Rebooting in \d+ seconds", timeout=60, clean=True)
        b.vm.wait_exit(timeout=60)
    # ... the next start is slot a by itself, which says the trial failed.
    # Then, in that system, a new nmbl the firmware would refuse: nmbl
    # refuses it first, when it can see it is not signed.
    r = boot_slot_a(image, vars_file, "5-after-panic", slot_a, "Bless, install unsigned")
    code, order, next_, said = r["bless"]
    assert code == 0 and "slot b" in said and "did not boot" in said, said
    assert order == f"{slot_a},{found_order}" and next_ == "-", (order, next_)
    assert slot_states(r["status"][3]) == {"a": "good", "b": "failed"}, r["status"][3]
    code, order, next_, said = r["install"]
    assert code == 1 and "not signed" in said, said
    assert next_ == "-", f"BootNext {next_} set for a UKI nmbl refused"
    # A power cut while the slot's file is written: the firmware starts the
    # good slot, as before; the ESP checked as the machine's start checks
    # it, the install, again, ends.
    with Boot(image, vars_file, "6-install-killed") as b:
        b.select("Install other")
        b.vm.wait_for(r"writing \S*nmbl-b\.efi\.new", timeout=BOOT_TIMEOUT, clean=True)
        b.vm.kill()
    fsck_esp(image)
    r = boot_slot_a(image, vars_file, "7-install-other", slot_a, "Install other")
    code, order, next_, said = r["install"]
    assert code == 0 and "is in slot b" in said and next_ == slot_b, (next_, said)
    # The firmware refuses the slot's file when it is replaced behind nmbl's
    # back after the install.
    esp = f"{image}@@{mkdisk.ALIGN}"
    subprocess.run(["mcopy", "-o", "-i", esp, build_path("test", "nmbl-unsigned.efi"),
                    "::/EFI/nmbl/nmbl-b.efi"], check=True)
    with Boot(image, vars_file, "8-firmware-refuses") as b:
        b.vm.wait_for(r"Access Denied|Security Violation", timeout=BOOT_TIMEOUT, clean=True)
        assert b.current() == (slot_a, "nmbl (slot a)")
        r = b.choose("Bless, remove")
    code, order, next_, said = r["bless"]
    assert code == 0 and "slot b" in said and "did not boot" in said, said
    assert order == f"{slot_a},{found_order}", order

    # Then the package erased in that system: what nmbl found is back, and
    # the firmware starts the ESP's default path again.
    code, order, next_, said = r["remove"]
    assert code == 0, said
    assert order == found_order and next_ == "-", (order, found_order, next_)
    assert slot_states(r["status"][3]) == {"a": "empty", "b": "empty"}, r["status"][3]
    with Boot(image, vars_file, "9-after-remove") as b:
        assert b.current() == (first, first_name)
        b.vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
