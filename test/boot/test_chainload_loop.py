# SPDX-License-Identifier: GPL-3.0-or-later
"""A chainloader target the firmware refuses does not make a reboot loop.

Under Secure Boot OVMF refuses an unsigned EFI program and goes on by
BootOrder, to nmbl, whose default entry (timeout 1) would chainload it
again, boot after boot.  In the firmware start right after the one nmbl set
BootNext in, chainloader says so in one sentence and the menu comes back
instead; the start after that tries again.  One variable store across three
power cycles, read between them: one Boot#### for the program throughout."""

import functools
import os
import re
import struct
import uuid

from fixture import BOOT_TIMEOUT, ESP_VOLID, MENU_READY, VM, build_path, make_disk, workdir

# efitools' HelloWorld as Debian ships it: signed by no one.
UNSIGNED = "/usr/lib/efitools/x86_64-linux-gnu/HelloWorld.efi"
TARGET = "/EFI/tools/Unsigned.efi"
GLOBAL = uuid.UUID("8be4df61-93ca-11d2-aa0d-00e098032b8c")
NMBL = uuid.UUID("ae17c541-beff-44af-a46f-e16a7a0ed200")
MTC = uuid.UUID("eb704011-1402-11d3-8e77-00a0c969723b")
# The sentence, in the console with its line breaks made spaces again.
REFUSED = (r"error: the firmware could not start \(hd\d+,gpt1\)" + re.escape(TARGET)
           + r" at the last boot \(Boot([0-9A-F]{4})\); not trying again")


def grub_cfg():
    return f"""set default=0
set timeout=1

menuentry 'Unsigned tool' {{
	search --no-floppy --fs-uuid --set=root {ESP_VOLID}
	chainloader {TARGET}
}}
"""


@functools.cache
def disk():
    return make_disk("chainload-loop", grub_cfg(), {}, esp_files={TARGET.lstrip("/"): UNSIGNED})


def variables(path):
    """The live variables of an OVMF variable store: {(vendor, name): data}.

    EDK2's authenticated store: the firmware volume's header, the store's
    28-byte header, then 4-byte aligned records of a 60-byte header
    (0x55AA, state, attributes, counts, name and data sizes, vendor GUID),
    the UTF-16 name and the data.  A record is live in state VAR_ADDED
    (0x3f), or 0x3e while its replacement is being written."""
    with open(path, "rb") as f:
        fd = f.read()
    (fv_header_len,) = struct.unpack_from("<H", fd, 0x30)
    (store_size,) = struct.unpack_from("<I", fd, fv_header_len + 16)
    end = fv_header_len + store_size
    off = fv_header_len + 28
    found, transition = {}, {}
    while off + 60 <= end:
        start_id, state = struct.unpack_from("<HB", fd, off)
        if start_id != 0x55AA:
            break
        name_size, data_size = struct.unpack_from("<II", fd, off + 36)
        vendor = uuid.UUID(bytes_le=fd[off + 44:off + 60])
        name = fd[off + 60:off + 60 + name_size].decode("utf-16-le").rstrip("\0")
        data = fd[off + 60 + name_size:off + 60 + name_size + data_size]
        if state == 0x3F:
            found[(vendor, name)] = data
        elif state == 0x3E:
            transition[(vendor, name)] = data
        off = (off + 60 + name_size + data_size + 3) & ~3
    return {**transition, **found}


def option(data):
    """A Boot#### value's description and the file its device path names."""
    (path_len,) = struct.unpack_from("<H", data, 4)
    desc_end = 6
    while data[desc_end:desc_end + 2] != b"\0\0":
        desc_end += 2
    description = data[6:desc_end].decode("utf-16-le")
    path = data[desc_end + 2:desc_end + 2 + path_len]
    files = []
    while len(path) >= 4:
        kind, sub, length = struct.unpack_from("<BBH", path, 0)
        if (kind, sub) == (4, 4):
            files.append(path[4:length].decode("utf-16-le").rstrip("\0"))
        if kind == 0x7F or length < 4:
            break
        path = path[length:]
    return description, "".join(files)


def chainload_options(found):
    """{number: file} of the Boot#### options nmbl's chainloader wrote."""
    options = {}
    for (vendor, name), data in found.items():
        if vendor == GLOBAL and re.fullmatch(r"Boot[0-9A-F]{4}", name):
            description, file = option(data)
            if description == "nmbl chainloader":
                options[int(name[4:], 16)] = file
    return options


def record(found):
    """nmbl's NmblChainload: (flags, option number, firmware start count)."""
    data = found[(NMBL, "NmblChainload")]
    assert len(data) == 44 and data[0] == 1, data
    return data[1], struct.unpack_from("<H", data, 2)[0], struct.unpack_from("<I", data, 4)[0]


def start_count(found):
    return struct.unpack("<I", found[(MTC, "MTC")])[0]


def test_refused_chainload_comes_back_to_the_menu_once():
    store = os.path.join(workdir("chainload-loop-vars"), "OVMF_VARS.fd")

    # 1: the default entry after its timeout: nmbl sets BootNext, reboots.
    with VM(disk(), snapshot=True, vars_file=store,
            log_file=build_path("test", "chainload-loop-1.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=BOOT_TIMEOUT)
    found = variables(store)
    options = chainload_options(found)
    assert list(options.values()) == ["\\EFI\\tools\\Unsigned.efi"], options
    (number,) = options
    assert found[(GLOBAL, "BootNext")] == struct.pack("<H", number)
    flags, recorded, count = record(found)
    # OVMF counts its starts: the rule that needs no guess is the one used.
    assert (flags, recorded, count) == (1, number, start_count(found)), (flags, recorded, count)

    # 2: the firmware refuses it and starts nmbl; nmbl says so, once, and
    # shows the menu without rebooting.
    with VM(disk(), snapshot=True, vars_file=store,
            log_file=build_path("test", "chainload-loop-2.log")) as vm:
        vm.wait_for(rf'BdsDxe: failed to load Boot{number:04X} "nmbl chainloader"',
                    timeout=BOOT_TIMEOUT, clean=True)
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        refused = vm.wait_for(r"not\s+trying\s+again", timeout=BOOT_TIMEOUT, clean=True)
        # GRUB waits 10 s for a key after an error, then draws the menu
        # again, its timeout spent: the menu waits for the user, who finds
        # GRUB's command line there, not a reboot.
        vm.wait_for(r"keys\s+to\s+select\s+which\s+entry\s+is\s+highlighted", timeout=60,
                    since=refused.end(), clean=True)
        vm.send("c")
        vm.wait_for(r"grub>", timeout=60, clean=True)
        assert vm.returncode is None, "nmbl rebooted again"
        sentences = re.findall(REFUSED, " ".join(vm.clean_log().split()))
        assert sentences == [f"{number:04X}"], f"not said once, of Boot{number:04X}: {sentences}"
    found = variables(store)
    assert chainload_options(found) == options, chainload_options(found)
    assert (GLOBAL, "BootNext") not in found
    # Nothing written: the count alone tells this start from the next.
    assert record(found) == (flags, recorded, count)
    assert start_count(found) == count + 1

    # 3: the next start is no longer the one that came back: nmbl tries
    # again (the user may have fixed the signature), with the same option.
    with VM(disk(), snapshot=True, vars_file=store,
            log_file=build_path("test", "chainload-loop-3.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=BOOT_TIMEOUT)
        assert "not trying again" not in " ".join(vm.clean_log().split()), \
            "refused in a later start"
    found = variables(store)
    assert chainload_options(found) == options, chainload_options(found)
    assert found[(GLOBAL, "BootNext")] == struct.pack("<H", number)
    assert record(found) == (1, number, count + 2)
