# SPDX-License-Identifier: GPL-3.0-or-later
"""What a grub.cfg hands to the firmware, proven on OVMF with Secure Boot:
chainloader starts a signed EFI program on the ESP once (BootNext) and the
boot after is nmbl again; fwsetup enters the firmware's setup.  Each takes
power cycles on one variable store: nmbl asks and reboots (QEMU runs with
-no-reboot, so it exits), then the firmware does what was asked."""

import functools
import os

from fixture import (BOOT_TIMEOUT, ESP_VOLID, MENU_READY, VM, build_path, make_disk, workdir)
from vm import KEY_DOWN, KEY_ENTER

HELLO_TEXT = "This file is used to prove you have managed"


def grub_cfg():
    # As os-prober and 30_uefi-firmware write them.
    return f"""set default=0
set timeout=2

menuentry 'Hello World (on /dev/vda1)' --class efi $menuentry_id_option 'osprober-efi-{ESP_VOLID}' {{
	insmod part_gpt
	insmod fat
	search --no-floppy --fs-uuid --set=root {ESP_VOLID}
	chainloader /EFI/tools/HelloWorld.efi
}}
if [ "$grub_platform" = "efi" ]; then
	fwsetup --is-supported
	if [ "$?" = 0 ]; then
		menuentry 'UEFI Firmware Settings' $menuentry_id_option 'uefi-firmware' {{
			fwsetup
		}}
	fi
fi
"""


@functools.cache
def disk():
    return make_disk("firmware", grub_cfg(), {},
                     esp_files={"EFI/tools/HelloWorld.efi": build_path("test", "HelloWorld.efi")})


def vars_file(name):
    return os.path.join(workdir(name), "OVMF_VARS.fd")


def test_chainloader_starts_the_program_once_then_nmbl_again():
    store = vars_file("firmware-chainload-vars")
    with VM(disk(), snapshot=True, vars_file=store,
            log_file=build_path("test", "firmware-chainload-1.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        # The default entry after the timeout: nmbl asks, then reboots.
        vm.wait_exit(timeout=BOOT_TIMEOUT)
    with VM(disk(), snapshot=True, vars_file=store,
            log_file=build_path("test", "firmware-chainload-2.log")) as vm:
        vm.wait_for(r'BdsDxe: starting Boot[0-9A-F]{4} "nmbl chainloader" from '
                    r'HD\(1,GPT,[0-9A-F-]+,0x800,0x[0-9A-F]+\)/\\EFI\\tools\\HelloWorld\.efi',
                    timeout=BOOT_TIMEOUT, clean=True)
        vm.wait_for(HELLO_TEXT, timeout=BOOT_TIMEOUT, clean=True)
        # HelloWorld returns; OVMF then shows its front page, as EDK2 does
        # after a BootNext program that returned.  Its last entry, Reset,
        # ends QEMU (-no-reboot).
        vm.send(KEY_ENTER)
        vm.wait_for("Select Entry", timeout=BOOT_TIMEOUT, clean=True)
        vm.send(KEY_DOWN * 5 + KEY_ENTER)
        vm.wait_exit(timeout=60)
    # BootNext is spent: the next boot goes by BootOrder, to nmbl.
    with VM(disk(), snapshot=True, vars_file=store,
            log_file=build_path("test", "firmware-chainload-3.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        assert HELLO_TEXT not in vm.clean_log(), "the program ran a second time"


def test_fwsetup_enters_the_firmware_setup():
    store = vars_file("firmware-fwsetup-vars")
    with VM(disk(), snapshot=True, vars_file=store,
            log_file=build_path("test", "firmware-fwsetup-1.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        vm.send(KEY_DOWN + KEY_ENTER)
        vm.wait_exit(timeout=BOOT_TIMEOUT)
    with VM(disk(), snapshot=True, vars_file=store,
            log_file=build_path("test", "firmware-fwsetup-2.log")) as vm:
        # OVMF's front page, which only OsIndications brings up unasked.
        vm.wait_for("Boot Maintenance Manager", timeout=BOOT_TIMEOUT, clean=True)
