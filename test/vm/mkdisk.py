#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Build a raw disk image (GPT, or MBR) from directory trees, without mounting anything.

Partition 1 is the ESP (vfat), then an optional /boot (ext4, or ext2), then an
optional root (ext4, or btrfs), then an optional partition left empty; a disk
without an ESP starts with /boot. Each file system is made in a file of its own
(mkfs.vfat + mcopy, mke2fs -d, mkfs.btrfs --rootdir) and copied into the
image at its 1 MiB aligned offset.

    mkdisk OUT.img --esp DIR [--boot DIR] [--root DIR] [--json] ...
    import mkdisk; layout = mkdisk.build("disk.img", esp="esp", root="root")
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import uuid

MiB = 1024 * 1024
# mkfs.btrfs refuses smaller file systems.
# Small trees still need room for btrfs's chunks (metadata twice): 128 MiB
# was once 5 MiB short for the target's root holding /boot.
BTRFS_MIN_MIB = 256
SECTOR = 512
ALIGN = 1 * MiB  # first partition at 1 MiB, every partition on a 1 MiB boundary

TYPE_ESP = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
# /boot and / use the generic "Linux filesystem data" type, like installers of
# GRUB-booted systems do; the discoverable "root x86-64" type would let
# systemd-gpt-auto mount root behind the test's back.
TYPE_LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
# The same roles on an MBR disk: "EFI System" (0xEF), "Linux" (0x83).
MBR_TYPES = {TYPE_ESP: "ef", TYPE_LINUX: "83"}


def tree_bytes(path):
    """Space a tree needs on disk: every file and directory rounded up to 4 KiB."""
    total = 4096
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            st = os.lstat(os.path.join(top, name))
            total += max(4096, math.ceil(st.st_size / 4096) * 4096)
    return total


def default_mib(path, fraction):
    """Tree size plus a share of it plus 16 MiB, in whole MiB.

    ext4 needs the share for its journal and inode tables; the fixed 16 MiB is
    room for whatever a test writes (grubenv, a bigger UKI dropped in later)."""
    return math.ceil((tree_bytes(path) * (1 + fraction) + 16 * MiB) / MiB)


class MkdiskError(Exception):
    pass


def run(cmd, **kw):
    # The tool has said what went wrong on stderr; name the tool, not its argv.
    if subprocess.run(cmd, **kw).returncode != 0:
        raise MkdiskError(f"{cmd[0]} failed")


def _uuid(value, what):
    """value as a canonical lower-case UUID, a random one if None."""
    if value is None:
        return str(uuid.uuid4())
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValueError(f"{what} is not a UUID: {value}") from None


def make_vfat(path, size, tree, volid, label, start_lba):
    with open(path, "wb") as f:
        f.truncate(size)
    # -h: hidden sectors = where the partition starts, as a formatter on the
    # real partition would write; --mbr=n: no fake MBR inside the partition.
    cmd = ["mkfs.vfat", "--mbr=n", "-h", str(start_lba), "-i", volid]
    if label:
        cmd += ["-n", label]
    run(cmd + [path], stdout=subprocess.DEVNULL)
    entries = sorted(os.listdir(tree))
    if entries:
        # MTOOLS_SKIP_CHECK: mtools otherwise rejects FAT geometries it finds odd.
        env = dict(os.environ, MTOOLS_SKIP_CHECK="1")
        run(["mcopy", "-s", "-Q", "-i", path]
            + [os.path.join(tree, e) for e in entries] + ["::/"], env=env,
            stdin=subprocess.DEVNULL)  # never hang on mcopy's name-clash prompt


def make_extfs(path, size, tree, fs_uuid, label, fstype="ext4"):
    with open(path, "wb") as f:
        f.truncate(size)
    # -m 0: no blocks reserved for root, so the headroom is really free.
    # -i 4096: one inode per 4 KiB, since tree_bytes() counts >= 4 KiB per
    # entry this can never run out of inodes before running out of blocks.
    cmd = ["mke2fs", "-q", "-F", "-t", fstype, "-b", "4096", "-m", "0",
           "-i", "4096", "-E", "root_owner=0:0", "-U", fs_uuid, "-d", tree]
    if label:
        cmd += ["-L", label]
    run(cmd + [path])


def make_btrfs(path, size, tree, fs_uuid, label, subvol=None):
    """With SUBVOL, TREE goes into a subvolume of that name, as Fedora's
    installer puts / into "root".  btrfs-progs before 6.6 makes subvolumes
    only on a mounted file system: that one case needs root and a loop
    device."""
    with open(path, "wb") as f:
        f.truncate(size)
    cmd = ["mkfs.btrfs", "-q", "-f", "-U", fs_uuid]
    if not subvol:
        cmd += ["--rootdir", tree]
    if label:
        cmd += ["-L", label]
    run(cmd + [path], stdout=subprocess.DEVNULL)
    # mkfs.btrfs --rootdir grows the file when the tree does not fit: a file
    # system larger than its partition, which Linux refuses to mount.
    if os.path.getsize(path) > size:
        raise MkdiskError(f"btrfs needs {math.ceil(os.path.getsize(path) / MiB)} MiB for "
                          f"{tree}, the partition has {size // MiB} MiB")
    if not subvol:
        return
    with tempfile.TemporaryDirectory(prefix=".mkdisk-mnt-", dir=os.path.dirname(path)) as mnt:
        run(["mount", "-t", "btrfs", "-o", "loop", path, mnt])
        try:
            run(["btrfs", "-q", "subvolume", "create", os.path.join(mnt, subvol)])
            run(["cp", "-a", "--", tree + "/.", os.path.join(mnt, subvol)])
        finally:
            run(["umount", mnt])


def build(out, esp, boot=None, root=None, *, root_fstype="ext4", boot_fstype="ext4",
          esp_size=None, boot_size=None, root_size=None, empty_size=None,
          esp_label=None, boot_label=None, root_label=None,
          esp_volid=None, boot_uuid=None, root_uuid=None,
          esp_partuuid=None, boot_partuuid=None, root_partuuid=None, empty_partuuid=None,
          disk_guid=None, root_subvol=None, table="gpt"):
    """Write the image OUT and return its layout as a dict (see README.md).

    ESP None: no ESP, /boot (or root) is partition 1.  TABLE is gpt or mbr;
    on MBR a partition's UUID is the disk id and its number ("1234abcd-01",
    as blkid and root=PARTUUID= name it), so none may be given.

    Sizes are in MiB (None: computed from the tree). UUIDs, the vfat volume
    id ("ABCD-1234" or "abcd1234") and the disk GUID are random unless given.
    BOOT_FSTYPE is ext4 or ext2 (what Debian's installer gives a /boot of
    its own); ROOT_FSTYPE is ext4 or btrfs.  Without ROOT_SUBVOL a btrfs
    holds the tree at its top (subvolume paths in it are plain directories,
    which GRUB and Linux read alike); with it, the tree is that subvolume
    (see make_btrfs).  EMPTY_SIZE: a last partition of that many MiB with
    no file system (role "empty", fstype and uuid None), for what is made
    inside the machine, as an installer makes it: LUKS, LVM; a list of
    sizes for several such partitions (EMPTY_PARTUUID then names the
    first).
    """
    if root_fstype not in ("ext4", "btrfs"):
        raise ValueError(f"root file system must be ext4 or btrfs: {root_fstype}")
    if boot_fstype not in ("ext4", "ext2"):
        raise ValueError(f"/boot file system must be ext4 or ext2: {boot_fstype}")
    if table not in ("gpt", "mbr"):
        raise ValueError(f"partition table must be gpt or mbr: {table}")
    if table == "mbr" and any((esp_partuuid, boot_partuuid, root_partuuid, empty_partuuid)):
        raise ValueError("an MBR partition's UUID is the disk id and its number: give disk_guid")
    parts = []
    if esp is not None:
        parts.append(dict(role="esp", fstype="vfat", tree=esp, mib=esp_size,
                          label=esp_label, uuid=esp_volid, partuuid=esp_partuuid,
                          type=TYPE_ESP, name="ESP"))
    if boot is not None:
        parts.append(dict(role="boot", fstype=boot_fstype, tree=boot, mib=boot_size,
                          label=boot_label, uuid=boot_uuid, partuuid=boot_partuuid,
                          type=TYPE_LINUX, name="boot"))
    if root is not None:
        parts.append(dict(role="root", fstype=root_fstype, tree=root, mib=root_size,
                          label=root_label, uuid=root_uuid, partuuid=root_partuuid,
                          type=TYPE_LINUX, name="root", subvol=root_subvol))
    empty_sizes = [] if empty_size is None else (
        list(empty_size) if isinstance(empty_size, (list, tuple)) else [empty_size])
    for n, size in enumerate(empty_sizes):
        parts.append(dict(role="empty", fstype=None, tree=None, mib=size, label=None,
                          uuid=None, partuuid=empty_partuuid if n == 0 else None,
                          type=TYPE_LINUX, name=None))

    offset = ALIGN
    for number, p in enumerate(parts, 1):
        if p["fstype"] is not None and not os.path.isdir(p["tree"]):
            raise FileNotFoundError(f"{p['role']} tree is not a directory: {p['tree']}")
        if p["mib"] is None:
            p["mib"] = default_mib(p["tree"], 0.1 if p["fstype"] == "vfat" else 0.25)
            if p["fstype"] == "btrfs":
                p["mib"] = max(p["mib"], BTRFS_MIN_MIB)
        p["number"] = number
        p["start"] = offset
        p["size"] = p["mib"] * MiB
        offset += p["size"]
        p["partuuid"] = (None if table == "mbr" else
                         _uuid(p["partuuid"], f"{p['role']} partition UUID"))
        if p["fstype"] == "vfat":
            volid = (p["uuid"] or uuid.uuid4().hex[:8]).replace("-", "").upper()
            if not re.fullmatch(r"[0-9A-F]{8}", volid):  # mkfs.vfat would half-parse it
                raise ValueError(f"ESP volume id must be 8 hex digits: {p['uuid']}")
            p["volid"] = volid
            p["uuid"] = volid[:4] + "-" + volid[4:]  # as blkid and GRUB print it
        elif p["fstype"] is not None:
            p["uuid"] = _uuid(p["uuid"], f"{p['role']} file system UUID")
    # Room after the last partition for the backup GPT (33 sectors).
    image_size = offset + ALIGN
    disk_guid = _uuid(disk_guid, "disk GUID")

    if table == "mbr":
        disk_id = disk_guid.replace("-", "")[:8]
        script = ["label: dos", f"label-id: 0x{disk_id}", "unit: sectors",
                  f"sector-size: {SECTOR}", ""]
        for p in parts:
            p["partuuid"] = f"{disk_id}-{p['number']:02x}"
            script.append(f"{p['number']} : start={p['start'] // SECTOR}, "
                          f"size={p['size'] // SECTOR}, type={MBR_TYPES[p['type']]}")
    else:
        script = ["label: gpt", f"label-id: {disk_guid}", "unit: sectors",
                  f"sector-size: {SECTOR}", ""]
        for p in parts:
            script.append(f"{p['number']} : start={p['start'] // SECTOR}, "
                          f"size={p['size'] // SECTOR}, type={p['type']}, uuid={p['partuuid']}"
                          + (f", name=\"{p['name']}\"" if p["name"] else ""))

    try:
        _write(out, parts, image_size, script)
    except BaseException:
        if os.path.exists(out):
            os.unlink(out)  # a half-written image must not look usable
        raise

    keep = ("number", "role", "fstype", "start", "size", "uuid", "partuuid", "label")
    return {
        "image": out,
        "table": table,
        "size": image_size,
        "sector_size": SECTOR,
        "disk_guid": disk_guid,
        "partitions": [dict({k: p[k] for k in keep}, start_sector=p["start"] // SECTOR)
                       for p in parts],
    }


def _write(out, parts, image_size, script):
    workdir = os.path.dirname(os.path.abspath(out))
    # Partition files live next to OUT: same file system, and /tmp may be small.
    with tempfile.TemporaryDirectory(prefix=".mkdisk-", dir=workdir) as tmp:
        with open(out, "wb") as f:
            f.truncate(image_size)
        run(["sfdisk", "--quiet", "--no-reread", "--no-tell-kernel", out],
            input="\n".join(script) + "\n", text=True)
        for p in parts:
            if p["fstype"] is None:
                continue  # the zeros of the sparse image
            fs = os.path.join(tmp, p["role"] + ".img")
            if p["fstype"] == "vfat":
                make_vfat(fs, p["size"], p["tree"], p["volid"], p["label"],
                          p["start"] // SECTOR)
            elif p["fstype"] == "btrfs":
                make_btrfs(fs, p["size"], p["tree"], p["uuid"], p["label"], p.get("subvol"))
            else:
                make_extfs(fs, p["size"], p["tree"], p["uuid"], p["label"], p["fstype"])
            # conv=sparse keeps the image sparse where the file system is empty.
            run(["dd", f"if={fs}", f"of={out}", "bs=1M", f"seek={p['start'] // MiB}",
                 "conv=notrunc,sparse", "status=none"])


def add_arguments(parser):
    """The layout options, shared with `vm.py boot`."""
    parser.add_argument("--esp", metavar="DIR", help="tree for the ESP (vfat), optional")
    parser.add_argument("--boot", metavar="DIR", help="tree for /boot (ext4), optional")
    parser.add_argument("--root", metavar="DIR", help="tree for / (ext4), optional")
    parser.add_argument("--root-fstype", default="ext4", choices=("ext4", "btrfs"),
                        help="file system of / (default ext4)")
    for role in ("esp", "boot", "root"):
        parser.add_argument(f"--{role}-size", type=int, metavar="MiB",
                            help=f"size of the {role} partition (default: tree + headroom)")
        parser.add_argument(f"--{role}-label", metavar="L", help=f"{role} file system label")
        parser.add_argument(f"--{role}-partuuid", metavar="UUID", help=f"{role} GPT partition UUID")
    parser.add_argument("--esp-volid", metavar="XXXX-XXXX", help="ESP vfat volume id")
    parser.add_argument("--boot-uuid", metavar="UUID", help="/boot ext4 UUID")
    parser.add_argument("--root-uuid", metavar="UUID", help="/ ext4 UUID")
    parser.add_argument("--root-subvol", metavar="NAME",
                        help="btrfs: put the root tree into subvolume NAME (needs root, a loop device)")
    parser.add_argument("--disk-guid", metavar="UUID",
                        help="GPT disk GUID (MBR: its first 8 hex digits are the disk id)")
    parser.add_argument("--table", default="gpt", choices=("gpt", "mbr"),
                        help="partition table (default gpt)")


def build_from_args(out, args):
    names = ("root_fstype", "esp_size", "boot_size", "root_size", "esp_label", "boot_label",
             "root_label", "esp_volid", "boot_uuid", "root_uuid", "esp_partuuid",
             "boot_partuuid", "root_partuuid", "disk_guid", "root_subvol", "table")
    return build(out, args.esp, args.boot, args.root,
                 **{n: getattr(args, n) for n in names})


def main(argv=None):
    parser = argparse.ArgumentParser(prog="mkdisk", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", metavar="OUT.img", help="image to write (overwritten)")
    parser.add_argument("--json", action="store_true", help="print the layout as JSON")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        layout = build_from_args(args.out, args)
    except (OSError, ValueError, MkdiskError) as e:
        print(f"mkdisk: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(layout, indent=2))
    else:
        for p in layout["partitions"]:
            print(f"{p['number']} {p['role']:4} {p['fstype']:4} start={p['start'] // MiB}MiB "
                  f"size={p['size'] // MiB}MiB uuid={p['uuid']} partuuid={p['partuuid']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
