/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

static unsigned char ext4_sb[2048], vfat_sb[512];

/* A FAT boot sector as libblkid checks it (sizes, counts and media byte,
 * not only the name): 16384 sectors, of which the file holds the first. */
static void fat_boot_sector(unsigned char *b)
{
	memcpy(b, "\xeb\x3c\x90mkfs.fat", 11);
	b[12] = 2;    /* 512-byte sectors */
	b[13] = 4;    /* sectors per cluster */
	b[14] = 4;    /* reserved sectors */
	b[16] = 2;    /* FATs */
	b[18] = 2;    /* 512 root directory entries */
	b[21] = 0xf8; /* media: a fixed disk */
	b[22] = 16;   /* sectors per FAT */
	b[0x21] = 0x40;
	memcpy(b + 0x36, "FAT16   ", 8);
	b[510] = 0x55;
	b[511] = 0xaa;
}

/* /dev/vda with an ESP at sector 2048 and an ext4 /boot at 81920. */
static struct nmbl_ctx *setup(void)
{
	struct nmbl_ctx *ctx;

	ext4_sb[1080] = 0x53;
	ext4_sb[1081] = 0xef;
	fat_boot_sector(vfat_sb);
	fixture_text("/sys/class/block/vda/vda1/start", "2048\n");
	fixture_text("/sys/class/block/vda/vda2/start", "81920\n");
	fixture_text("/sys/class/block/vda/queue/rotational", "0\n");
	fixture_write("/dev/vda1", vfat_sb, sizeof(vfat_sb));
	CHECK_INT(truncate(fixture_path("/dev/vda1"), 16384 * 512), 0);
	fixture_write("/dev/vda2", ext4_sb, sizeof(ext4_sb));
	fixture_text("/dev/vda3", "neither");
	fixture_text("/sys/class/block/vda/vda3/start", "100000");
	fixture_text("/proc/filesystems", "nodev\tsysfs\n\text4\n\tvfat\n");
	fake.root = fixture_root();
	fake.calls[0] = '\0';
	fake.mount_errno = 0;
	CHECK_INT(nmbl_new(fixture_root(), &ctx), 0);
	return ctx;
}

static void test_mounts_partition_by_start_sector(void)
{
	struct nmbl_ctx *ctx = setup();
	char *mp = NULL;

	CHECK_INT(nmbl_mount_partition(ctx, "/dev/vda", 81920, &mp), 0);
	CHECK_STR(mp, fixture_path("/run/nmbl/mnt/vda2"));
	CHECK_STR(fake.calls, "mount /dev/vda2 /run/nmbl/mnt/vda2 ext4 norecovery;");
	free(mp);

	/* The second file from the same partition reuses the mount. */
	CHECK_INT(nmbl_mount_partition(ctx, "/dev/vda", 81920, &mp), 0);
	CHECK_STR(fake.calls, "mount /dev/vda2 /run/nmbl/mnt/vda2 ext4 norecovery;");
	free(mp);

	CHECK_INT(nmbl_mount_partition(ctx, "/dev/vda", 2048, &mp), 0);
	CHECK(strstr(fake.calls, "mount /dev/vda1 /run/nmbl/mnt/vda1 vfat -;"));
	free(mp);

	fake.calls[0] = '\0';
	CHECK_INT(nmbl_umount_all(ctx), 0);
	CHECK_STR(fake.calls, "umount /run/nmbl/mnt/vda1;umount /run/nmbl/mnt/vda2;");
	nmbl_unref(ctx);
}

static void test_unknown_file_system_tries_each_type(void)
{
	struct nmbl_ctx *ctx = setup();
	char *mp = (char *)"untouched";

	fake.mount_errno = -EINVAL;
	CHECK_INT(nmbl_mount_partition(ctx, "/dev/vda", 100000, &mp), -ENODEV);
	CHECK_STR(fake.calls, "mount /dev/vda3 /run/nmbl/mnt/vda3 ext4 norecovery;"
			      "mount /dev/vda3 /run/nmbl/mnt/vda3 vfat -;");
	CHECK_STR(mp, "untouched");
	nmbl_unref(ctx);
}

static void test_bad_requests(void)
{
	struct nmbl_ctx *ctx = setup();
	char *mp = (char *)"untouched";

	CHECK_INT(nmbl_mount_partition(ctx, "/dev/vda", 12345, &mp), -ENXIO);
	CHECK_INT(nmbl_mount_partition(ctx, "/dev/vdz", 2048, &mp), -ENOENT);
	CHECK_INT(nmbl_mount_partition(ctx, "/dev/", 2048, &mp), -EINVAL);
	CHECK_INT(nmbl_mount_partition(ctx, "/dev/..", 2048, &mp), -EINVAL);
	CHECK_INT(nmbl_mount_partition(NULL, "/dev/vda", 2048, &mp), -EINVAL);
	fake.mount_errno = -EACCES;
	CHECK_INT(nmbl_mount_partition(ctx, "/dev/vda", 2048, &mp), -EACCES);
	CHECK_STR(mp, "untouched");
	CHECK_STR(fake.calls, "mount /dev/vda1 /run/nmbl/mnt/vda1 vfat -;");
	nmbl_unref(ctx);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_mounts_partition_by_start_sector,
		test_unknown_file_system_tries_each_type,
		test_bad_requests,
		NULL,
	};
	return unit_main(tests);
}
