# SPDX-License-Identifier: GPL-3.0-or-later
"""nmbl started the way a PC starts it: firmware, then shim, then nmbl.

shim is Debian's shim-unsigned, signed with the test key that the test
firmware's db holds, standing in for Microsoft's UEFI CA (what a PC's db
holds); nmbl's UKIs are signed with the test key too, standing in for the
distribution's certificate (test/target/mkshim, test/test.mk).  shim's
latest SBAT level, which it applies only when SbatPolicy asks, revokes
nmbl's generation 1 (as a shim update would after a security fix in
nmbl); nmbl's own UKI carries generation 1, the new UKI of this test
generation 2.

Four starts of one machine, disk and EFI variables kept:

1. A fresh machine whose ESP has shim at the removable path and nmbl as
   shim's default second stage (grubx64.efi): nmbl's package installs its
   UKI into its slots beside shim (\\EFI\\nmbl), started by shim's option.
2. The firmware takes BootNext: shim starts slot a by its load option.  The
   kernel's keyrings hold what shim handed on (its vendor certificate,
   Debian's CA, through MokListRT).  Slot a blessed; shim told to apply
   its latest SBAT level; a UKI of generation 1 installed in slot b.
3. shim applies the level and refuses slot b (its error box, confirmed with
   Enter as a user would; MokManager's countdown); the firmware falls back
   to slot a, which says the trial failed.  SbatLevel revokes nmbl 1.
4. The firmware lost its variables (a CMOS reset): shim at the removable
   path runs its fallback, which finds nmbl's BOOTX64.CSV, recreates
   nmbl's option and starts it; nmbl takes that option for slot a's.
"""

import os
import re
import subprocess

from fixture import BOOT_TIMEOUT, build_path, kver, make_disk
from test_slots import ESP_MIB, Boot, grub_cfg, slot_states
from vm import KEY_ENTER
import mkdisk

SHIM = "/EFI/nmbl/shimx64.efi"
MENU = [
    ("Install through shim", f"install:/efi/new/gen2.efi@{SHIM},status"),
    ("Bless, revoke generation 1, install it",
     "bless,status,trust,sbat-latest,install:/efi/new/gen1.efi,status"),
    ("Bless", "bless,status,trust"),
]
CERT = r"NMBL-TARGET-CERT (.*?)\r?\n"
SBATLEVEL = r"NMBL-TARGET-SBATLEVEL (.*?)\r?\n"
# The file systemd-stub says it was started as.
IMAGE = r"NMBL-TARGET-EFIVAR LoaderImageIdentifier=(.*?)\r?\n"


def image_started(log):
    return re.findall(IMAGE, log)[-1]


def make_machine():
    shim = build_path("test", "shim-signed")
    image = make_disk("shim", grub_cfg(MENU), {
        f"vmlinuz-{kver()}": build_path("test", "vmlinuz-test"),
        f"initrd.img-{kver()}": build_path("test", "target-initrd.img")},
        uki=os.path.join("test", "shim-signed", "shimx64.efi"),
        esp_files={"EFI/BOOT/grubx64.efi": build_path("test", "nmbl-sbat2.efi"),
                   "EFI/BOOT/mmx64.efi": os.path.join(shim, "mmx64.efi"),
                   "EFI/nmbl/shimx64.efi": os.path.join(shim, "shimx64.efi"),
                   "EFI/nmbl/mmx64.efi": os.path.join(shim, "mmx64.efi"),
                   "new/gen1.efi": build_path("nmbl.efi"),
                   "new/gen2.efi": build_path("test", "nmbl-sbat2.efi")},
        esp_size=ESP_MIB)
    return image, os.path.join(os.path.dirname(image), "vars.fd")


def start(image, vars_file, name):
    return Boot(image, vars_file, name, menu=MENU, log="shim")


def test_shim_starts_nmbl_refuses_a_revoked_one_and_restores_it():
    image, vars_file = make_machine()

    # 1. shim (removable path) → its default second stage, nmbl.
    with start(image, vars_file, "1-install") as b:
        r = b.choose("Install through shim")
        assert image_started(b.vm.clean_log()) == "\\EFI\\BOOT\\grubx64.efi"
    code, order, slot_a, said = r["install"]
    assert code == 0 and "is in slot a" in said, said
    assert slot_a != "-" and slot_a not in order.split(","), (order, slot_a)
    assert slot_states(r["status"][3]) == {"a": "trial", "b": "empty"}, r["status"][3]

    # 2. BootNext: shim with slot a's file as its load option.
    with start(image, vars_file, "2-through-shim") as b:
        assert b.current() == (slot_a, "nmbl (slot a)")
        r = b.choose("Bless, revoke generation 1, install it")
        log = b.vm.clean_log()
    assert image_started(log) == "\\EFI\\nmbl\\nmbl-a.efi"
    code, order, next_, said = r["bless"]
    assert code == 0 and "slot a booted this system" in said, said
    assert order.split(",")[0] == slot_a and next_ == "-", (order, next_)
    certs = re.findall(CERT, log)
    # shim's vendor certificate reached the kernel as shim hands it over.
    assert any("UEFI:MokListRT" in c for c in certs), certs
    assert any("Debian Secure Boot CA" in c for c in certs), certs
    assert any("SnakeOil" in c for c in certs), certs
    assert not any(line.startswith("nmbl,") for line in re.findall(SBATLEVEL, log)), log
    assert r["sbat-latest"][0] == 0, r["sbat-latest"]
    code, order, slot_b, said = r["install"]
    assert code == 0 and "is in slot b" in said, said
    assert slot_b not in ("-", slot_a), slot_b
    assert slot_states(r["status"][3]) == {"a": "good", "b": "trial"}, r["status"][3]

    # 3. shim applies its latest level: nmbl 1 is revoked, slot b refused;
    # the firmware goes on to slot a.
    with start(image, vars_file, "3-revoked") as b:
        refused = r"Verification failed: \(0x1A\) Security Violation"
        b.vm.wait_for(refused, timeout=BOOT_TIMEOUT, clean=True)
        b.vm.send_raw(KEY_ENTER)
        b.vm.wait_for(r"Failed to load image: Security Policy Violation", timeout=60, clean=True)
        # shim offers MokManager (to enrol what it refused): into it, and
        # out by its first choice, "Continue boot"; shim tries once more.
        b.vm.wait_for(r"Press any key to perform MOK management", timeout=60, clean=True)
        b.vm.send_raw(KEY_ENTER)
        b.vm.wait_for(r"Continue boot", timeout=60, clean=True)
        b.vm.send_raw(KEY_ENTER)
        b.vm.wait_for(refused, timeout=60, clean=True)
        b.vm.send_raw(KEY_ENTER)
        assert b.current() == (slot_a, "nmbl (slot a)")
        r = b.choose("Bless")
        log = b.vm.clean_log()
    code, order, next_, said = r["bless"]
    assert code == 0 and "slot b" in said and "did not boot" in said, said
    assert slot_states(r["status"][3]) == {"a": "good", "b": "failed"}, r["status"][3]
    assert "nmbl,2" in re.findall(SBATLEVEL, log), re.findall(SBATLEVEL, log)

    # 4. Variables lost; the ESP as shim's package leaves the removable
    # path with --force-extra-removable: shim and its fallback.
    os.unlink(vars_file)
    esp = f"{image}@@{mkdisk.ALIGN}"
    subprocess.run(["mcopy", "-o", "-i", esp, build_path("test", "shim-signed", "fbx64.efi"),
                    "::/EFI/BOOT/fbx64.efi"], check=True)
    with start(image, vars_file, "4-fallback") as b:
        # The firmware's own option for the disk started shim at the
        # removable path, whose fallback started nmbl's slot.
        number, title = b.current()
        r = b.choose("Bless")
        log = b.vm.clean_log()
    assert number not in (slot_a, slot_b) and title != "nmbl (slot a)", (number, title)
    assert image_started(log) == "\\EFI\\nmbl\\nmbl-a.efi"
    # ... after it made nmbl's option again, first in BootOrder.
    order = r["status"][1].split(",")
    assert order[0] not in (number, "-"), (number, order)
    # nmbl knows that option for slot a's, whatever it is called.
    said = r["status"][3]
    assert re.search(rf"slot a: good +\\EFI\\nmbl\\nmbl-a\.efi \(Boot{order[0]}\)", said), said
