# SPDX-License-Identifier: GPL-3.0-or-later
"""What the VM tests share: the build's outputs and disks made from them."""

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

BUILD = os.environ.get("NMBL_BUILD", "build")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm"))

import mkdisk  # noqa: E402
import vm  # noqa: E402
from vm import KEY_DOWN, KEY_ENTER, KEY_HOME  # noqa: E402

# For the tests, which take the machine from here.
VM = vm.VM

# Fixed ids, so that a grub.cfg can name the file systems before they exist
# (test/test.mk names ROOT_UUID too, as TEST_ROOT_UUID, in the target UKI's
# command line).
BOOT_UUID = "5e1f0c1a-7b2d-4c3e-9f40-b0070b0070b0"
ESP_PARTUUID = "e5b0e5b0-1111-4222-8333-e5b0e5b0e5b0"
ESP_VOLID = "E5B0-0001"
ROOT_UUID = "7a46e7a1-0d5c-4a8b-8d1e-2007f5007f50"

# What the menu shows once grub-emu has drawn it and started counting down.
MENU_READY = vm.MENU_READY
# The target's init: "NMBL-TARGET-UP release=<uname -r> cmdline=<cmdline>".
# Up to the end of the line: the console may have delivered half of it yet.
TARGET_UP = r"NMBL-TARGET-UP release=(\S+) cmdline=([^\r\n]*)\r?\n"
# Which kernel boot the target is: a kexec starts a new one (a new boot id,
# a new kernel log without nmbl's lines), a direct boot does not.
TARGET_KERNEL = r"NMBL-TARGET-KERNEL boot-id=(\S+) linux-starts=(\d+) nmbl-lines=(\d+)\r?\n"
# nmbl's status before the menu, with the boot id of nmbl's kernel.
NMBL_BOOT_ID = r"nmbl: boot-id: (\S+)\r?\n"


# Firmware to the target's first line: what these phases take on this
# machine, with room for a busy one (test/vm/vm.py, phase_budget()).
BOOT_TIMEOUT = vm.DEFAULT_TIMEOUT

# VM keywords for a machine that starts at nmbl's menu: the first of a disk
# and configuration boots and is saved once the menu is up, the others go
# on from there (test/vm/README.md, "Saved machines"), some 15 s sooner
# under TCG.  For tests about what comes after the menu is up, not before.
AT_MENU = {"saved": os.path.join(BUILD, "test", "saved"), "save_at": MENU_READY}


# The menu's help line, drawn again whenever the menu comes back.
MENU_LINE = "Use the .* keys to select which entry is highlighted"


def choose(machine, index):
    """Entry INDEX (from 0) of the menu on MACHINE, booted."""
    machine.send(KEY_HOME + KEY_DOWN * index + KEY_ENTER)


def back_to_the_menu(machine):
    """Past GRUB's "Press any key to continue", the menu drawn again."""
    machine.wait_for("Press any key to continue", timeout=120, clean=True)
    machine.send(KEY_ENTER)
    machine.wait_for(MENU_LINE, timeout=60, clean=True)


def entry(title, kernel, extra, initrd=None, entry_id=None):
    """A menu entry as grub-mkconfig writes one for the target's kernel."""
    initrd = initrd or f"/initrd.img-{kver()}"
    id_option = f" --id '{entry_id}'" if entry_id else ""
    return f"""menuentry '{title}' --class debian --class gnu-linux{id_option} {{
	search --no-floppy --fs-uuid --set=root {BOOT_UUID}
	echo	'Loading Linux {kver()} ...'
	linux	{kernel} root=UUID={ROOT_UUID} ro console=ttyS0,115200 {extra}
	initrd	{initrd}
}}
"""


def expected_cmdline(kernel, extra):
    """What GRUB on EFI passes: the image as GRUB expanded its name comes
    first ($root is expanded before the command runs)."""
    return f"BOOT_IMAGE={kernel} root=UUID={ROOT_UUID} ro console=ttyS0,115200 {extra}"


# Where a terminal broke a word too long for the rest of its line (GRUB's
# serial terminal is 80 columns wide).
BREAK = r"(?:\r?\n\r?)?"


def words(text):
    """A pattern for TEXT that matches however the console wrapped it:
    between words, and inside a word that did not fit its line."""
    return r"\s+".join(BREAK.join(re.escape(c) for c in w) for w in text.split())


def build_path(*parts):
    return os.path.join(BUILD, *parts)


# How an initramfs may be compressed, by its first bytes: the tool that
# undoes it (the kernel takes lz4's legacy frame format).
DECOMPRESSORS = {b"\x28\xb5\x2f\xfd": ["zstd", "-dc"], b"\x02\x21\x4c\x18": ["lz4", "-dc"]}


def initramfs_cpio(data):
    """The cpio archive of an initramfs image's bytes (zstd, lz4 or none)."""
    tool = DECOMPRESSORS.get(data[:4])
    if tool is None:
        return data
    return subprocess.run(tool, input=data, capture_output=True, check=True).stdout


@functools.cache
def kver():
    with open(build_path("kernel", "kver")) as f:
        return f.read().strip()


def partition(image, number):
    """Partition NUMBER of IMAGE's table, as sfdisk --json gives it (start
    and size in 512-byte sectors)."""
    table = json.loads(subprocess.run(["sfdisk", "--json", image], capture_output=True,
                                      text=True, check=True).stdout)["partitiontable"]
    return table["partitions"][number - 1]


def add_sparse(image, number, name, size):
    """/NAME on the ext4 of IMAGE's partition NUMBER: SIZE bytes, all a hole
    but its first (a copy would write them all; debugfs writes holes as
    holes)."""
    part = partition(image, number)
    work = os.path.dirname(image)
    fs, src = os.path.join(work, f"{name}.ext4"), os.path.join(work, name)
    with open(src, "wb") as f:
        f.write(b"\x07")
        f.truncate(size)
    subprocess.run(["dd", f"if={image}", f"of={fs}", "bs=512", f"skip={part['start']}",
                    f"count={part['size']}", "status=none"], check=True)
    subprocess.run(["debugfs", "-w", "-R", f"write {src} {name}", fs], check=True,
                   capture_output=True)
    subprocess.run(["dd", f"if={fs}", f"of={image}", "bs=512", f"seek={part['start']}",
                    "conv=notrunc,sparse", "status=none"], check=True)
    os.unlink(fs)
    os.unlink(src)


def workdir(name):
    path = build_path("test", name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def debian_stub(name, boot_uuid=BOOT_UUID, hint=None):
    """The grub.cfg Debian's grub-install puts on the ESP, where GRUB's EFI
    image starts: /boot by its UUID (HINT: the partition to try first, as
    grub-install names it), then its grub.cfg.  Written as NAME-stub.cfg
    in the build's test directory; returns its path."""
    path = build_path("test", f"{name}-stub.cfg")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    search = f"search.fs_uuid {boot_uuid} root" + (f" {hint}" if hint else "")
    with open(path, "w") as f:
        f.write(f"{search}\nset prefix=($root)'/grub'\nconfigfile $prefix/grub.cfg\n")
    return path


@functools.cache
def _digest(path, size, mtime_ns):
    """SHA-256 of a file's bytes (SIZE and MTIME_NS: which version of it)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fingerprint(path):
    """What a file or tree holds, as far as a disk made from it goes: its
    names, link targets and bytes."""
    if not os.path.isdir(path):
        st = os.stat(path)
        return _digest(os.path.abspath(path), st.st_size, st.st_mtime_ns)
    items = []
    for top, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(dirs + files):
            full = os.path.join(top, name)
            rel = os.path.relpath(full, path)
            if os.path.islink(full):
                items.append((rel, "->", os.readlink(full)))
            elif os.path.isfile(full):
                items.append((rel, oct(os.stat(full).st_mode & 0o7777), _fingerprint(full)))
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()


def make_disk(name, grub_cfg, boot_files, uki="nmbl.efi", esp_files=None, separate_boot=True,
              boot_links=None, **layout):
    """A disk as a Debian install with a separate /boot has it: the nmbl UKI
    (UKI, below the build directory) as the ESP's default loader, /boot with
    grub/grub.cfg and the kernels, and the target's root file system.
    BOOT_FILES maps a name in /boot to the build file to copy there, ESP_FILES
    a path on the ESP to one, BOOT_LINKS a name in /boot to the target of a
    symbolic link made there.  GRUB_CFG None writes no grub/grub.cfg (the
    files bring their own).  Without SEPARATE_BOOT, /boot is a directory of
    the root file system, as Debian installs it.
    LAYOUT goes to mkdisk.build (root_label, root_partuuid, root_fstype,
    root_subvol, table, ...; the UUIDs default to the tests' own).
    Returns the image's path; the trees are in NAME's work directory.

    Made once for what it is made of: when NAME's image was made from the
    same files, configuration and code and no machine has written to it
    since, it is kept (and with it the machines saved on it, VM(saved=));
    test modules running at once that want the same disk make it once, the
    others wait for it."""
    layout = dict(dict(boot_uuid=BOOT_UUID, root_uuid=ROOT_UUID, esp_volid=ESP_VOLID),
                  **layout)
    if layout.get("table", "gpt") == "gpt":
        layout.setdefault("esp_partuuid", ESP_PARTUUID)
    sources = {"uki": build_path(uki), "root": build_path("test", "target-root"),
               "code": mkdisk.__file__, "fixture": __file__}
    recipe = json.dumps([name, grub_cfg, separate_boot, boot_links, layout,
                         {k: _fingerprint(v) for k, v in sources.items()},
                         {tree: {dest: _fingerprint(src) for dest, src in (files or {}).items()}
                          for tree, files in (("boot", boot_files), ("esp", esp_files))}],
                        sort_keys=True)
    os.makedirs(build_path("test"), exist_ok=True)
    with open(build_path("test", f".{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        image = os.path.join(build_path("test", name), "disk.img")
        made = os.path.join(build_path("test", name), "made.json")
        try:
            with open(made) as f:
                record = json.load(f)
            st = os.stat(image)
            if record == {"recipe": recipe, "size": st.st_size, "mtime_ns": st.st_mtime_ns}:
                return image
        except (OSError, ValueError):
            pass
        _make_disk(name, grub_cfg, boot_files, uki, esp_files, separate_boot, boot_links, layout)
        st = os.stat(image)
        with open(made, "w") as f:
            json.dump({"recipe": recipe, "size": st.st_size, "mtime_ns": st.st_mtime_ns}, f)
        return image


def _make_disk(name, grub_cfg, boot_files, uki, esp_files, separate_boot, boot_links, layout):
    top = workdir(name)
    esp = os.path.join(top, "esp")
    root = build_path("test", "target-root")
    if separate_boot:
        boot = os.path.join(top, "boot")
    else:
        root = os.path.join(top, "root")
        shutil.copytree(build_path("test", "target-root"), root, symlinks=True)
        boot = os.path.join(root, "boot")
    os.makedirs(os.path.join(esp, "EFI", "BOOT"))
    os.makedirs(boot, exist_ok=True)
    shutil.copy(build_path(uki), os.path.join(esp, "EFI", "BOOT", "BOOTX64.EFI"))
    for tree, files in ((boot, boot_files), (esp, esp_files or {})):
        for dest, src in files.items():
            os.makedirs(os.path.dirname(os.path.join(tree, dest)), exist_ok=True)
            shutil.copy(src, os.path.join(tree, dest))
    for name, target in (boot_links or {}).items():
        os.symlink(target, os.path.join(boot, name))
    if grub_cfg is not None:
        os.makedirs(os.path.join(boot, "grub"), exist_ok=True)
        with open(os.path.join(boot, "grub", "grub.cfg"), "w") as f:
            f.write(grub_cfg)
    image = os.path.join(top, "disk.img")
    mkdisk.build(image, esp=esp, boot=boot if separate_boot else None, root=root, **layout)
