# SPDX-License-Identifier: GPL-3.0-or-later
"""A disk with bad blocks: a kernel, an initrd or a grub.cfg that cannot be
read gives one sentence and the menu back, never a crash, whether Linux
reads it for a kexec or nmbl unpacks it for a direct boot; the good entry
still boots.  QEMU's blkdebug driver fails every read of one sector in the
middle of each bad file (EIO), as a failing disk or a pulled USB stick
would; Linux reads the kernel and initrd, GRUB's own drivers the grub.cfg."""

import os
import re
import subprocess

from fixture import (BOOT_TIMEOUT, BOOT_UUID, MENU_READY, TARGET_UP, VM, back_to_the_menu,
                     build_path, choose, entry, expected_cmdline, kver, make_disk, partition,
                     words)

BOOT_PARTITION = 2
# nmbl's own consoles (its UKI's command line): an entry that keeps them
# boots directly.
CONSOLES = "console=tty0 console=ttyS0,115200"
# A root the entry's initrd would set up, as its rd.lvm.lv= says (nmbl
# never gets that far).
STACKED_ROOT = "/dev/mapper/nmbl-root rd.lvm.lv=nmbl/root"

# A kernel parameter of the entries' own: they are kexec'd, so that their
# initrd is read (a direct boot would not need it).
KEXEC = "mitigations=off"


def bad_cfg():
    """A grub.cfg of many blocks, so that one in its middle is data."""
    filler = "".join(f"# line {i} of a long configuration file\n" for i in range(6000))
    return filler + "menuentry 'Never shown' { true }\n"


def grub_cfg():
    k = kver()
    # The configuration first: a failed boot leaves its kernel loaded, and
    # an entry without one of its own (configfile) would boot that.
    return ("set timeout=600\n\n"
            + f"menuentry 'Bad configuration' {{\n\tsearch --no-floppy --fs-uuid --set=root "
              f"{BOOT_UUID}\n\tconfigfile /bad.cfg\n}}\n"
            + entry("Bad kernel", "/vmlinuz-bad", f"{KEXEC} nmbl.entry=bad-kernel")
            + entry("Bad initrd", f"/vmlinuz-{k}", f"{KEXEC} nmbl.entry=bad-initrd",
                    initrd="/initrd-bad.img")
            + direct_entry("Bad initrd, booted directly", "/initrd-bad-direct.img",
                           "bad-direct")
            + entry("Good", f"/vmlinuz-{k}", f"{KEXEC} nmbl.entry=good"))


def direct_entry(title, initrd, name):
    """An entry nmbl boots without a second kernel (nmbl's own consoles,
    nothing that needs a kexec) whose root its initrd sets up (a
    volume of LVM's): nmbl unpacks that initrd itself, before it hands
    over."""
    return f"""menuentry '{title}' {{
	search --no-floppy --fs-uuid --set=root {BOOT_UUID}
	linux	/vmlinuz-{kver()} root={STACKED_ROOT} ro {CONSOLES} nmbl.entry={name}
	initrd	{initrd}
}}
"""


def middle_sector(image, part, name):
    """The disk sector holding the middle block of /NAME on PART's ext4."""
    fs = os.path.join(os.path.dirname(image), "boot.ext4")
    subprocess.run(["dd", f"if={image}", f"of={fs}", "bs=512", f"skip={part['start']}",
                    f"count={part['size']}", "status=none"], check=True)
    header = subprocess.run(["dumpe2fs", "-h", fs], capture_output=True, text=True,
                            check=True).stdout
    block_size = int(re.search(r"^Block size:\s+(\d+)", header, re.M).group(1))
    stat = subprocess.run(["debugfs", "-R", f"stat /{name}", fs], capture_output=True,
                          text=True, check=True).stdout
    size = int(re.search(r"Size: (\d+)", stat).group(1))
    logical = size // block_size // 2
    out = subprocess.run(["debugfs", "-R", f"bmap /{name} {logical}", fs], capture_output=True,
                         text=True, check=True).stdout
    physical = int(out.split()[-1])
    assert physical > 0, f"/{name} has no block {logical}"
    os.unlink(fs)
    return part["start"] + physical * block_size // 512


def bad_disk():
    k = kver()
    work = build_path("test", "read-errors-src")
    os.makedirs(work, exist_ok=True)
    cfg = os.path.join(work, "bad.cfg")
    with open(cfg, "w") as f:
        f.write(bad_cfg())
    image = make_disk("read-errors", grub_cfg(), {
        "vmlinuz-bad": build_path("test", "vmlinuz-test"),
        f"vmlinuz-{k}": build_path("test", "vmlinuz-test"),
        "initrd-bad.img": build_path("test", "target-initrd.img"),
        "initrd-bad-direct.img": build_path("test", "target-initrd.img"),
        f"initrd.img-{k}": build_path("test", "target-initrd.img"),
        "bad.cfg": cfg})
    part = partition(image, BOOT_PARTITION)
    rules = ""
    for name in ("vmlinuz-bad", "initrd-bad.img", "initrd-bad-direct.img", "bad.cfg"):
        rules += (f'[inject-error]\nevent = "read_aio"\nerrno = "5"\n'
                  f'sector = "{middle_sector(image, part, name)}"\nonce = "off"\n\n')
    config = os.path.join(os.path.dirname(image), "blkdebug.conf")
    with open(config, "w") as f:
        f.write(rules)
    return image, config


def test_bad_blocks_give_a_sentence_and_the_menu_back():
    image, config = bad_disk()
    with VM(image, snapshot=True, blkdebug=config,
            log_file=build_path("test", "read-errors.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        choose(vm, 0)
        vm.wait_for(r"cannot read `/dev/vda\d*': Input/output error", timeout=BOOT_TIMEOUT,
                    clean=True)
        back_to_the_menu(vm)
        choose(vm, 1)
        vm.wait_for(words("cannot load /vmlinuz-bad: the disk could not be read"),
                    timeout=BOOT_TIMEOUT, clean=True)
        back_to_the_menu(vm)
        choose(vm, 2)
        vm.wait_for(words(f"cannot load /vmlinuz-{kver()}: the disk could not be read"),
                    timeout=BOOT_TIMEOUT, clean=True)
        back_to_the_menu(vm)
        # nmbl unpacks this one itself: a read error (before, SIGBUS in
        # process 1, and a panic; test_contained has an initrd larger than
        # nmbl holds).
        choose(vm, 3)
        vm.wait_for(words(f"cannot start /vmlinuz-{kver()} with its initrd: an initrd could "
                          "not be read (a bad block, or a disk that went away)."),
                    timeout=BOOT_TIMEOUT, clean=True)
        back_to_the_menu(vm)
        choose(vm, 4)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
        log = vm.clean_log()
    assert up.group(2) == expected_cmdline(f"/vmlinuz-{kver()}", f"{KEXEC} nmbl.entry=good")
    assert "the boot menu" not in log, "the menu crashed on a read error"
    assert "Kernel panic" not in log, "process 1 died"
    assert "Never shown" not in log, "a grub.cfg with a bad block was shown"
