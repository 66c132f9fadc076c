/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * GRUB's names for the md arrays and LVM volumes nmbl's init sets up for
 * the menu, and the members it looks for: sysfs as the kernel shows it
 * below the fixture root, and members as images with the superblocks
 * libblkid reads (mdadm and lvm need devices).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "libnmbl.h"
#include "nmbl-private.h"
#include "unit.h"

#define MiB (1024 * 1024)
#define MD_MAGIC 0xa92b4efc
#define VG_ID "AbCdEf0123456789GhIjKl0123456789"
#define LV_ID "MnOpQr0123456789StUvWx0123456789"

static struct nmbl_ctx *ctx;

static void names(int (*fn)(const char *, const char *, char **, char **), const char *a,
		  const char *b, int want_r, const char *want_name, const char *want_id)
{
	char *name = (char *)"untouched", *id = (char *)"untouched";
	int r = fn(a, b, &name, &id);

	CHECK_INT(r, want_r);
	if (r < 0) {
		CHECK_STR(name, "untouched");
		return;
	}
	if (want_name)
		CHECK_STR(name, want_name);
	else
		CHECK(name == NULL);
	CHECK_STR(id, want_id);
	free(name);
	free(id);
}

static void test_md_names(void)
{
	/* 1.x: the name after the host, the UUID as GRUB prints its bytes. */
	names(nmbl_md_map_names, "nmbl-debian:pv00", "6e6d626c-0e1d-4c2a-9f3b-7a1100000001", 0,
	      "md/pv00", "mduuid/6e6d626c0e1d4c2a9f3b7a1100000001");
	names(nmbl_md_map_names, "boot", "6E6D626C:0E1D4C2A:9F3B7A11:00000B00", 0, "md/boot",
	      "mduuid/6e6d626c0e1d4c2a9f3b7a1100000b00");
	/* 0.90: no name. */
	names(nmbl_md_map_names, NULL, "0a0b0c0d:01020304:05060708:090a0b0c", 0, NULL,
	      "mduuid/0a0b0c0d0102030405060708090a0b0c");
	names(nmbl_md_map_names, "", "0a0b0c0d:01020304:05060708:090a0b0c", 0, NULL,
	      "mduuid/0a0b0c0d0102030405060708090a0b0c");
	/* What no device map line can hold, or no md UUID is. */
	names(nmbl_md_map_names, "host:a b", "0a0b0c0d:01020304:05060708:090a0b0c", -EINVAL, 0, 0);
	names(nmbl_md_map_names, "x(y)", "0a0b0c0d:01020304:05060708:090a0b0c", -EINVAL, 0, 0);
	names(nmbl_md_map_names, "host:", "0a0b0c0d:01020304:05060708:090a0b0c", -EINVAL, 0, 0);
	names(nmbl_md_map_names, "a", "0a0b0c0d:01020304:05060708:090a0b0", -EINVAL, 0, 0);
	names(nmbl_md_map_names, "a", "0a0b0c0d:01020304:05060708:090a0b0c0", -EINVAL, 0, 0);
	names(nmbl_md_map_names, "a", "0a0b0c0d:01020304:05060708:090a0b0g", -EINVAL, 0, 0);
	names(nmbl_md_map_names, "a", "", -EINVAL, 0, 0);
}

static void test_lvm_names(void)
{
	/* device-mapper's name is GRUB's (dashes doubled in both); the
	 * UUIDs as LVM's metadata writes them. */
	names(nmbl_lvm_map_names, "rhel-root", "LVM-" VG_ID LV_ID, 0, "lvm/rhel-root",
	      "lvmid/AbCdEf-0123-4567-89Gh-IjKl-0123-456789/MnOpQr-0123-4567-89St-UvWx-0123-456789");
	names(nmbl_lvm_map_names, "nmbl--debian--vg-swap_1", "LVM-" VG_ID LV_ID, 0,
	      "lvm/nmbl--debian--vg-swap_1",
	      "lvmid/AbCdEf-0123-4567-89Gh-IjKl-0123-456789/MnOpQr-0123-4567-89St-UvWx-0123-456789");
	/* LVM's own sub-volumes, other device-mapper users, bad names. */
	names(nmbl_lvm_map_names, "rhel-root-real", "LVM-" VG_ID LV_ID "-real", -EINVAL, 0, 0);
	names(nmbl_lvm_map_names, "vda3_crypt", "CRYPT-LUKS2-0123-vda3_crypt", -EINVAL, 0, 0);
	names(nmbl_lvm_map_names, "a b", "LVM-" VG_ID LV_ID, -EINVAL, 0, 0);
	names(nmbl_lvm_map_names, "a", "LVM-" VG_ID "0123456789012345678901234567890-", -EINVAL,
	      0, 0);
	names(nmbl_lvm_map_names, "a", "LVM-" VG_ID, -EINVAL, 0, 0);
}

/* /dev/NAME below the fixture root as a disk the kernel shows in sysfs,
 * SIZE bytes of zeros (sparse). */
static char *disk(const char *name, off_t size)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/class/block/%s/size", name);
	fixture_text(path, "0\n");
	snprintf(path, sizeof(path), "/dev/%s", name);
	return fixture_image(path, size);
}

/* An md 1.2 member: its superblock 4 KiB in. */
static void md_member(const char *name, const unsigned char uuid[16], const char *set_name)
{
	char *dev = disk(name, 2 * MiB);
	unsigned char sb[256] = { 0 };

	nmbl_put_le32(sb, MD_MAGIC);
	nmbl_put_le32(sb + 4, 1);    /* major_version */
	memcpy(sb + 16, uuid, 16);   /* set_uuid */
	memcpy(sb + 32, set_name, strlen(set_name)); /* set_name */
	nmbl_put_le64(sb + 144, 8);  /* super_offset, in sectors */
	fixture_put(dev, 4096, sb, sizeof(sb));
	free(dev);
}

static char *map_of(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int r;

	if (!f)
		exit(2);
	r = nmbl_write_volume_map(ctx, f);
	fclose(f);
	if (r < 0) {
		free(text);
		return NULL;
	}
	return text;
}

static void test_members_and_map(void)
{
	static const unsigned char uuid[16] = { 0x6e, 0x6d, 0x62, 0x6c, 0x0e, 0x1d, 0x4c, 0x2a,
						0x9f, 0x3b, 0x7a, 0x11, 0x00, 0x00, 0x0b, 0x00 };
	unsigned kinds = 99;
	char *map, *dev;

	/* Nothing of either: nothing to assemble, nothing to name. */
	free(disk("vda", 4 * MiB));
	CHECK_INT(nmbl_find_volume_members(ctx, &kinds), 0);
	CHECK_INT(kinds, 0);
	map = map_of();
	CHECK_STR(map, "");
	free(map);

	/* Two members of a RAID 1, and the array the kernel made of them. */
	md_member("vda2", uuid, "nmbl-debian:boot");
	md_member("vdb1", uuid, "nmbl-debian:boot");
	CHECK_INT(nmbl_find_volume_members(ctx, &kinds), 0);
	CHECK_INT(kinds, NMBL_VOLUMES_MD);
	fixture_text("/sys/class/block/md127/md/array_state", "readonly\n");
	fixture_text("/sys/class/block/md127/slaves/vda2/size", "0\n");
	fixture_text("/sys/class/block/md127/slaves/vdb1/size", "0\n");
	fixture_write("/dev/md127", "", 0);
	/* An array stopped: not named. */
	fixture_text("/sys/class/block/md126/md/array_state", "inactive\n");
	fixture_text("/sys/class/block/md126/slaves/vda2/size", "0\n");

	/* An LVM physical volume on the array, as libblkid sees it there,
	 * and the volumes activated: LVM's, and another device-mapper user's. */
	dev = strdup(fixture_path("/dev/md127"));
	if (!dev || truncate(dev, 4 * MiB) < 0)
		exit(2);
	fixture_lvm_label(dev, 0);
	free(dev);
	fixture_text("/sys/class/block/dm-0/dm/name", "rhel-altboot\n");
	fixture_text("/sys/class/block/dm-0/dm/uuid", "LVM-" VG_ID LV_ID "\n");
	fixture_write("/dev/dm-0", "", 0);
	fixture_text("/sys/class/block/dm-1/dm/name", "vda3_crypt\n");
	fixture_text("/sys/class/block/dm-1/dm/uuid", "CRYPT-LUKS2-0123-vda3_crypt\n");
	fixture_write("/dev/dm-1", "", 0);

	map = map_of();
	CHECK_STR(map, "(lvm/rhel-altboot) /dev/dm-0\n"
		       "(lvmid/AbCdEf-0123-4567-89Gh-IjKl-0123-456789/"
		       "MnOpQr-0123-4567-89St-UvWx-0123-456789) /dev/dm-0\n"
		       "(md/boot) /dev/md127\n"
		       "(mduuid/6e6d626c0e1d4c2a9f3b7a1100000b00) /dev/md127\n");
	free(map);

	/* The member search walks every device, the array too. */
	CHECK_INT(nmbl_find_volume_members(ctx, &kinds), 0);
	CHECK_INT(kinds, NMBL_VOLUMES_MD | NMBL_VOLUMES_LVM);
	CHECK_INT(nmbl_find_volume_members(NULL, &kinds), -EINVAL);
	CHECK_INT(nmbl_write_volume_map(ctx, NULL), -EINVAL);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_md_names,
		test_lvm_names,
		test_members_and_map,
		NULL,
	};

	return unit_main_ctx(tests, &ctx);
}
