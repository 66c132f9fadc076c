#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""End-to-end check of the VM harness: mkdisk layouts, and Secure Boot really enforced.

Boots efitools' HelloWorld.efi three times, concurrently:
  signed with the snakeoil key, Secure Boot on  -> runs; then Enter, Reset via the menu, QEMU ends
  unsigned, Secure Boot on                      -> OVMF refuses it (Access Denied)
  unsigned, Secure Boot off                     -> runs (so the refusal is Secure Boot's doing)
Prints "vm-selftest: ok" and exits 0, or prints the failure and exits 1.
"""

import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mkdisk  # noqa: E402
from vm import KEY_DOWN, KEY_ENTER, VM, VMError  # noqa: E402

HELLO = "/usr/lib/efitools/x86_64-linux-gnu/HelloWorld.efi"
KEY = "/usr/share/ovmf/PkKek-1-snakeoil.key"
CERT = "/usr/share/ovmf/PkKek-1-snakeoil.pem"
HELLO_TEXT = "This file is used to prove you have managed"
# The disk's boot option, as OVMF names a virtio disk it found by itself.
DISK_OPTION = r'Boot\d{4} "UEFI Misc Device"'


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def esp_tree(root, efi):
    os.makedirs(os.path.join(root, "EFI", "BOOT"))
    shutil.copyfile(efi, os.path.join(root, "EFI", "BOOT", "BOOTX64.EFI"))
    return root


def check_layout(image, layout):
    """Read the image back: GPT entries, and each file system's own id at its offset."""
    table = json.loads(subprocess.run(["sfdisk", "--json", image], check=True,
                                      capture_output=True, text=True).stdout)
    gpt = table["partitiontable"]["partitions"]
    check(len(gpt) == len(layout["partitions"]), "partition count")
    with open(image, "rb") as f:
        for p, g in zip(layout["partitions"], gpt):
            check(g["start"] == p["start_sector"] and g["uuid"].lower() == p["partuuid"],
                  f"GPT entry {p['number']} does not match the layout")
            f.seek(p["start"])
            sb = f.read(2048)
            if p["fstype"] == "ext4":
                check(sb[1024 + 56:1024 + 58] == b"\x53\xef"
                      and str(uuid.UUID(bytes=sb[1024 + 104:1024 + 120])) == p["uuid"],
                      f"no ext4 with UUID {p['uuid']} at partition {p['number']}")
            else:
                at = 0x43 if sb[0x52:0x57] == b"FAT32" else 0x27
                volid = "%08X" % int.from_bytes(sb[at:at + 4], "little")
                check(volid[:4] + "-" + volid[4:] == p["uuid"],
                      f"no vfat with id {p['uuid']} at partition 1")


def selftest(tmp):
    for path in (HELLO, KEY, CERT):
        check(os.path.exists(path), f"missing {path} (packages efitools, ovmf)")

    key = os.path.join(tmp, "snakeoil.key")  # the shipped key is encrypted
    subprocess.run(["openssl", "rsa", "-passin", "pass:snakeoil", "-in", KEY, "-out", key],
                   check=True, capture_output=True)
    signed = os.path.join(tmp, "HelloWorld.signed.efi")
    subprocess.run(["sbsign", "--key", key, "--cert", CERT, "--output", signed, HELLO],
                   check=True, capture_output=True)

    # Signed disk through the API, with all three partitions and fixed ids.
    for d in ("boot/grub", "root/etc"):
        os.makedirs(os.path.join(tmp, d))
    with open(os.path.join(tmp, "boot/grub/grub.cfg"), "w") as f:
        f.write("set timeout=5\n")
    signed_img = os.path.join(tmp, "signed.img")
    layout = mkdisk.build(signed_img, esp_tree(os.path.join(tmp, "esp-signed"), signed),
                          os.path.join(tmp, "boot"), os.path.join(tmp, "root"),
                          esp_volid="1234-abcd", root_label="root",
                          root_uuid="5d2c7a42-6a4e-4bd0-9a35-0c8c3a7f0d11",
                          esp_partuuid="c0ffee00-0000-4000-8000-000000000001")
    check([p["role"] for p in layout["partitions"]] == ["esp", "boot", "root"], "roles")
    check(layout["partitions"][0]["uuid"] == "1234-ABCD", "ESP volume id")
    check_layout(signed_img, layout)

    # Unsigned disk through the command line, ESP only.
    unsigned_img = os.path.join(tmp, "unsigned.img")
    out = subprocess.run([os.path.join(HERE, "mkdisk"), unsigned_img, "--json", "--esp",
                          esp_tree(os.path.join(tmp, "esp-unsigned"), HELLO)],
                         check=True, capture_output=True, text=True).stdout
    check_layout(unsigned_img, json.loads(out))

    vars_file = os.path.join(tmp, "vars.fd")
    signed_vm = VM(signed_img, snapshot=True, vars_file=vars_file,
                   log_file=os.path.join(tmp, "signed.log"))
    refused_vm = VM(unsigned_img, snapshot=True, log_file=os.path.join(tmp, "refused.log"))
    plain_vm = VM(unsigned_img, snapshot=True, secure_boot=False,
                  log_file=os.path.join(tmp, "plain.log"))
    # All three run at once; each wait_for below finds output that may have come long ago.
    with signed_vm, refused_vm, plain_vm:
        signed_vm.wait_for(f"starting {DISK_OPTION}")
        signed_vm.wait_for(HELLO_TEXT)
        # HelloWorld waits for a key, then BDS shows its front page; its last
        # entry, Reset, ends QEMU because of -no-reboot.
        signed_vm.send(KEY_ENTER)
        signed_vm.wait_for("Select Entry")
        signed_vm.send(KEY_DOWN * 5 + KEY_ENTER)
        check(signed_vm.wait_exit() == 0, "QEMU did not exit 0 after Reset")

        refused_vm.wait_for(f"failed to load {DISK_OPTION}[^\r\n]*: Access Denied")
        check(HELLO_TEXT not in refused_vm.log, "unsigned binary ran under Secure Boot")

        plain_vm.wait_for(f"starting {DISK_OPTION}")
        plain_vm.wait_for(HELLO_TEXT)
    # OVMF records the boot options it found: the store must have kept them.
    check(os.path.exists(vars_file)
          and not filecmp.cmp(vars_file, signed_vm.ovmf_vars, shallow=False),
          "vars_file was not kept, or OVMF did not write to it")


def main():
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nmbl-vm-selftest-") as tmp:
        try:
            selftest(tmp)
        except (Failure, VMError, OSError, subprocess.CalledProcessError) as e:
            print(f"vm-selftest: FAILED: {e}")
            return 1
    print(f"vm-selftest: ok ({time.monotonic() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
