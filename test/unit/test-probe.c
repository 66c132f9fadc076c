/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The probes on images as real as a test can make them: file systems made
 * by their own mkfs, the signatures of what an initrd sets up written
 * where libblkid looks for them (mdadm, cryptsetup and lvm need devices),
 * a swap holding a hibernated system, and GPT disks whose primary table is
 * damaged.  Sparse files, so a 128 MiB btrfs costs nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "nmbl-private.h"
#include "unit.h"

#define MiB (1024 * 1024)
#define MD_MAGIC 0xa92b4efc
#define UUID_A "0a0a0a0a-1111-4222-8333-0a0a0a0a0a0a"
#define UUID_B "0b0b0b0b-1111-4222-8333-0b0b0b0b0b0b"

static struct nmbl_ctx *ctx;

/* /img/NAME below the fixture root, SIZE bytes of zeros (sparse). */
static char *image(const char *name, off_t size)
{
	char path[256];

	snprintf(path, sizeof(path), "/img/%s", name);
	return fixture_image(path, size);
}

static void get(const char *path, off_t off, void *data, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || pread(fd, data, len, off) != (ssize_t)len || close(fd) < 0) {
		perror(path);
		exit(2);
	}
}

static struct nmbl_probe probe(const char *path, uint64_t offset)
{
	struct nmbl_probe p = { .fstype = "untouched" };

	CHECK_INT(nmbl_probe_path(path, offset, &p), 0);
	return p;
}

/* What nmbl_probe_buffer() finds in BUF, as the fuzzers feed it; NULL
 * also on error. */
static const char *buffer_stacked(const void *buf, size_t len)
{
	struct nmbl_probe p;

	return nmbl_probe_buffer(buf, len, &p) < 0 ? NULL : p.stacked;
}

static const char *buffer_fstype(const void *buf, size_t len)
{
	struct nmbl_probe p;

	return nmbl_probe_buffer(buf, len, &p) < 0 ? NULL : p.fstype;
}

static void test_file_systems_by_their_mkfs(void)
{
	char *ext4 = image("ext4", 8 * MiB), *ext2 = image("ext2", 8 * MiB);
	char *vfat = image("vfat", 8 * MiB), *btrfs = image("btrfs", 128 * MiB);
	char *a = image("btrfs-a", 128 * MiB), *b = image("btrfs-b", 128 * MiB);
	const char *fstype = "untouched";
	uint64_t n = 0;
	struct nmbl_probe p;

	fixture_run("mkfs.ext4 -q -F %s", ext4);
	fixture_run("mkfs.ext2 -q -F %s", ext2);
	fixture_run("mkfs.vfat %s >/dev/null", vfat);
	fixture_run("mkfs.btrfs -q -f %s >/dev/null", btrfs);
	fixture_run("mkfs.btrfs -q -f -d single -m single %s %s >/dev/null", a, b);

	p = probe(ext4, 0);
	CHECK_STR(p.fstype, "ext4");
	CHECK_INT(p.n_devices, 1);
	CHECK(!p.stacked && !p.hibernated);
	/* The ext4 driver mounts ext2 too, with the same options. */
	CHECK_STR(probe(ext2, 0).fstype, "ext4");
	CHECK_STR(probe(vfat, 0).fstype, "vfat");
	p = probe(btrfs, 0);
	CHECK_STR(p.fstype, "btrfs");
	CHECK_INT(p.n_devices, 1);
	p = probe(b, 0);
	CHECK_STR(p.fstype, "btrfs");
	CHECK_INT(p.n_devices, 2);

	CHECK_INT(nmbl_probe_device(ctx, a, &fstype, &n), 0);
	CHECK_STR(fstype, "btrfs");
	CHECK_INT(n, 2);
	CHECK_INT(nmbl_probe_device(ctx, "/nonexistent", &fstype, &n), -ENOENT);
	CHECK_STR(fstype, "btrfs");
	free(ext4), free(ext2), free(vfat), free(btrfs), free(a), free(b);
}

/* A FAT boot sector left in front of an ext4: two file systems claim the
 * device, and libblkid (like mount(8) and udev) names neither. */
static void test_two_file_systems_name_none(void)
{
	char *dev = image("both", 8 * MiB), *fat = image("fat", 8 * MiB);
	unsigned char sector[512];

	fixture_run("mkfs.ext4 -q -F %s && mkfs.vfat %s >/dev/null", dev, fat);
	get(fat, 0, sector, sizeof(sector));
	fixture_put(dev, 0, sector, sizeof(sector));
	CHECK(probe(dev, 0).fstype == NULL);
	free(dev), free(fat);
}

static void test_stacked_layers(void)
{
	static const char luks[] = "LUKS\xba\xbe\0\1aes";
	char *dev = image("luks", 2 * MiB);
	unsigned char buf[4096] = { 0 }, sb[256] = { 0 };
	struct nmbl_probe p;
	uint64_t off;

	fixture_put(dev, 0, luks, sizeof(luks));
	p = probe(dev, 0);
	CHECK_STR(p.stacked, "LUKS");
	CHECK(p.fstype == NULL);
	/* The entry fuzzers use: the buffer as the whole device. */
	memcpy(buf, luks, sizeof(luks));
	CHECK_STR(buffer_stacked(buf, sizeof(buf)), "LUKS");
	CHECK(buffer_fstype(buf, sizeof(buf)) == NULL);
	CHECK(buffer_stacked(buf, 6) == NULL);
	CHECK(buffer_stacked(NULL, 0) == NULL);
	free(dev);

	/* md 1.0 keeps its superblock at the end, 8 KiB before the last
	 * 4 KiB boundary, and a RAID1 member's start is the file system:
	 * the member must not pass for the file system. */
	dev = image("md10", 8 * MiB + 3 * 512);
	fixture_run("mkfs.ext4 -q -F %s 7M", dev);
	CHECK_STR(probe(dev, 0).fstype, "ext4");
	off = ((8 * MiB + 3 * 512) & ~(uint64_t)4095) - 8192;
	nmbl_put_le32(sb, MD_MAGIC);
	nmbl_put_le32(sb + 4, 1);           /* major_version */
	nmbl_put_le64(sb + 144, off / 512); /* super_offset, in sectors */
	fixture_put(dev, (off_t)off, sb, sizeof(sb));
	p = probe(dev, 0);
	CHECK_STR(p.stacked, "RAID (md)");
	CHECK(p.fstype == NULL);
	free(dev);

	/* md 0.90: 64 KiB before the last 64 KiB boundary. */
	dev = image("md090", 8 * MiB + 4096);
	fixture_run("mkfs.ext4 -q -F %s 7M", dev);
	memset(sb, 0, sizeof(sb));
	nmbl_put_le32(sb, MD_MAGIC);
	nmbl_put_le32(sb + 8, 90); /* minor_version */
	fixture_put(dev, 8 * MiB - 65536, sb, sizeof(sb));
	CHECK_STR(probe(dev, 0).stacked, "RAID (md)");
	free(dev);

	/* md 1.2, 4 KiB in. */
	dev = image("md12", 2 * MiB);
	memset(sb, 0, sizeof(sb));
	nmbl_put_le32(sb, MD_MAGIC);
	nmbl_put_le32(sb + 4, 1);
	nmbl_put_le64(sb + 144, 8);
	fixture_put(dev, 4096, sb, sizeof(sb));
	CHECK_STR(probe(dev, 0).stacked, "RAID (md)");
	free(dev);

	/* Intel's firmware RAID (IMSM), two sectors before the end. */
	dev = image("isw", 2 * MiB);
	fixture_put(dev, 2 * MiB - 1024, "Intel Raid ISM Cfg Sig. 1.0.00", 30);
	CHECK_STR(probe(dev, 0).stacked, "RAID (Intel firmware)");
	free(dev);
}

static void test_lvm_physical_volume(void)
{
	char *dev = image("lvm", 4 * MiB);

	fixture_lvm_label(dev, 0);
	CHECK_STR(probe(dev, 0).stacked, "LVM");
	/* A label whose checksum fails is no physical volume. */
	fixture_lvm_label(dev, 100);
	CHECK(probe(dev, 0).stacked == NULL);
	free(dev);
}

static void test_hibernated_swap(void)
{
	char *swap = image("swap", 1 * MiB), *file = image("with-swapfile", 3 * MiB);
	unsigned char page[4096];
	struct nmbl_probe p;

	fixture_run("mkswap -q %s >/dev/null 2>&1", swap);
	p = probe(swap, 0);
	CHECK(!p.hibernated && !p.stacked && !p.fstype);
	/* What the kernel writes over the swap signature when it hibernates. */
	fixture_put(swap, 4096 - 10, "S1SUSPEND", 9);
	p = probe(swap, 0);
	CHECK(p.hibernated);
	CHECK(p.fstype == NULL);

	/* A swap file: its header where resume_offset= says, not at 0. */
	get(swap, 0, page, sizeof(page));
	fixture_put(file, 1 * MiB, page, sizeof(page));
	CHECK(!probe(file, 0).hibernated);
	CHECK(probe(file, 1 * MiB).hibernated);
	fixture_put(swap, 4096 - 10, "SWAPSPACE2", 10);
	CHECK(!probe(swap, 0).hibernated);
	free(swap), free(file);
}

/* Two partitions; the first at sector 2048. */
static char *gpt_disk(const char *name, const char *label)
{
	char *dev = image(name, 8 * MiB);

	fixture_run("printf 'label: %s\\nunit: sectors\\n"
	    "start=2048, size=4096, type=U, uuid=" UUID_A "\\n"
	    "start=6144, size=8192, uuid=" UUID_B "\\n' | sfdisk -q %s >/dev/null",
	    label, dev);
	return dev;
}

static void test_gpt_partition_guid(void)
{
	char *dev = gpt_disk("gpt", "gpt"), *dos = gpt_disk("dos", "dos");
	char uuid[37] = "untouched";
	unsigned char sector[512], zeros[512] = { 0 };

	CHECK_INT(nmbl_gpt_partuuid(dev, 2048, uuid), 0);
	CHECK_STR(uuid, UUID_A);
	CHECK_INT(nmbl_gpt_partuuid(dev, 6144, uuid), 0);
	CHECK_STR(uuid, UUID_B);
	strcpy(uuid, "untouched");
	CHECK_INT(nmbl_gpt_partuuid(dev, 4096, uuid), -ENXIO);
	CHECK_INT(nmbl_gpt_partuuid(dos, 2048, uuid), -ENOTBLK);
	CHECK_INT(nmbl_gpt_partuuid(fixture_path("/img/none"), 2048, uuid), -ENOENT);
	CHECK_STR(uuid, "untouched");

	/* The primary entries changed behind their checksum: a reader of the
	 * primary alone would name another partition; the backup's is right. */
	get(dev, 1024, sector, sizeof(sector));
	sector[16] ^= 0xff;
	fixture_put(dev, 1024, sector, sizeof(sector));
	CHECK_INT(nmbl_gpt_partuuid(dev, 2048, uuid), 0);
	CHECK_STR(uuid, UUID_A);
	/* No primary header at all. */
	fixture_put(dev, 512, zeros, sizeof(zeros));
	CHECK_INT(nmbl_gpt_partuuid(dev, 6144, uuid), 0);
	CHECK_STR(uuid, UUID_B);
	/* Nor a backup: no table to trust. */
	fixture_put(dev, 8 * MiB - 512, zeros, sizeof(zeros));
	CHECK_INT(nmbl_gpt_partuuid(dev, 2048, uuid), -ENOTBLK);
	free(dev), free(dos);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_file_systems_by_their_mkfs,
		test_two_file_systems_name_none,
		test_stacked_layers,
		test_lvm_physical_volume,
		test_hibernated_swap,
		test_gpt_partition_guid,
		NULL,
	};

	return unit_main_ctx(tests, &ctx);
}
