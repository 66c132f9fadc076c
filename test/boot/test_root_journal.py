# SPDX-License-Identifier: GPL-3.0-or-later
"""Direct boot on Debian's and Ubuntu's default layout, /boot inside the
root file system: nmbl reads the kernel from its own read-only mount of
the root's partition, without journal replay, and the root the target
gets must still be mounted as the entry says, on a superblock of its own.

A first boot (direct too: the target's own initrd has no btrfs) leaves a
journal to replay: the target writes a file, fsync()s it and powers off
without unmounting.  The second boot, direct, must show that file (the
kernel replayed the journal), a root without norecovery / nologreplay,
and a root that can be remounted read-write; the file system is clean
afterwards (e2fsck -fn, btrfs check)."""

import json
import os
import re
import subprocess

from fixture import (BOOT_TIMEOUT, MENU_READY, NMBL_BOOT_ID, ROOT_UUID, TARGET_KERNEL, TARGET_UP,
                     VM, build_path, kver, make_disk)
from vm import KEY_DOWN, KEY_ENTER, KEY_HOME

# nmbl's own kernel parameters (NMBL_CMDLINE, dracut/uki.mk): both entries
# keep them, and boot directly.
CONSOLES = "console=tty0 console=ttyS0,115200"
ROOT_PARTITION = 2  # ESP, then the root holding /boot


def grub_cfg():
    """As grub-mkconfig writes it for / holding /boot: paths under /boot."""
    def entry(title, extra):
        return f"""menuentry '{title}' --class debian {{
	search --no-floppy --fs-uuid --set=root {ROOT_UUID}
	linux	/boot/vmlinuz-{kver()} root=UUID={ROOT_UUID} ro {CONSOLES} quiet {extra}
	initrd	/boot/initrd.img-{kver()}
}}
"""
    return ("set default=0\nset timeout=2\n\n" + entry("Debian GNU/Linux", "nmbl.test-root=check")
            + entry("Leave a journal", "nmbl.test-root=dirty"))


def boot_files():
    return {f"vmlinuz-{kver()}": build_path("test", "vmlinuz-test"),
            f"initrd.img-{kver()}": build_path("test", "target-initrd.img")}


def partition(image, number, out):
    """Partition NUMBER of IMAGE, copied to OUT."""
    table = json.loads(subprocess.run(["sfdisk", "--json", image], capture_output=True,
                                      text=True, check=True).stdout)["partitiontable"]
    part = table["partitions"][number - 1]
    subprocess.run(["dd", f"if={image}", f"of={out}", "bs=512", f"skip={part['start']}",
                    f"count={part['size']}", "status=none"], check=True)
    return out


def needs_replay(fstype, part):
    if fstype == "ext4":
        out = subprocess.run(["dumpe2fs", "-h", part], capture_output=True, text=True,
                             check=True).stdout
        return "needs_recovery" in out
    out = subprocess.run(["btrfs", "inspect-internal", "dump-super", part], capture_output=True,
                         text=True, check=True).stdout
    return re.search(r"^log_root\s+(\d+)", out, re.M).group(1) != "0"


def check_clean(fstype, part):
    cmd = ["e2fsck", "-fn", part] if fstype == "ext4" else ["btrfs", "check", "--readonly", part]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}"


def journal_replayed_on_direct_boot(fstype):
    name = f"journal-{fstype}"
    image = make_disk(name, grub_cfg(), boot_files(), separate_boot=False, root_fstype=fstype)
    work = os.path.dirname(image)

    with VM(image, log_file=os.path.join(work, "dirty.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        vm.send(KEY_HOME + KEY_DOWN + KEY_ENTER)
        dirty = vm.wait_for(r"NMBL-TARGET-ROOT-DIRTY ([^\r\n]*)\r?\n", timeout=BOOT_TIMEOUT)
        first = vm.wait_for(TARGET_KERNEL, since=0).group(1)
        vm.wait_exit(timeout=60)
    assert dirty.group(1) == "ok", f"the first boot could not write its root: {dirty.group(1)}"
    assert needs_replay(fstype, partition(image, ROOT_PARTITION, os.path.join(work, "p1"))), \
        "the first boot left no journal to replay: the test proves nothing"

    with VM(image, log_file=os.path.join(work, "direct.log")) as vm:
        nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        kernel = vm.wait_for(TARGET_KERNEL, timeout=60)
        options = vm.wait_for(r"NMBL-TARGET-ROOT options=(\S+)", timeout=60).group(1)
        content = vm.wait_for(r"NMBL-TARGET-ROOT-FILE ([^\r\n]*)\r?\n", timeout=60).group(1)
        rw = vm.wait_for(r"NMBL-TARGET-ROOT-RW ([^\r\n]*)\r?\n", timeout=60).group(1)
        ro = vm.wait_for(r"NMBL-TARGET-ROOT-RO ([^\r\n]*)\r?\n", timeout=60).group(1)
        vm.wait_exit(timeout=60)
    assert "nmbl.test-root=check" in up.group(2), f"another entry booted: {up.group(2)}"
    assert kernel.group(1) == nmbl_id, "a second kernel started: this was no direct boot"
    for option in ("norecovery", "noload", "nologreplay"):
        assert option not in options.split(","), \
            f"the target's root is mounted {options}: nmbl's own mount was reused"
    assert content == first, \
        f"/nmbl-journal holds {content!r}, not the first boot's {first!r}: no journal replay"
    assert rw == "ok", f"the root cannot be written: {rw}"
    assert ro == "ok", f"the root cannot be remounted read-only: {ro}"
    check_clean(fstype, partition(image, ROOT_PARTITION, os.path.join(work, "p2")))


def test_ext4_root_holding_boot_replays_its_journal():
    journal_replayed_on_direct_boot("ext4")


def test_btrfs_root_holding_boot_replays_its_log():
    journal_replayed_on_direct_boot("btrfs")
