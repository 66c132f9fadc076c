/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * /boot on an md RAID 1 or in an LVM volume.  GRUB's EFI image reads such
 * a /boot by assembling the array or the volume group itself (its mdraid
 * and lvm modules).  nmbl lets Linux do it: nmbl-init assembles the
 * arrays and activates the volumes, read-only, with the distribution's
 * own tools, and the menu reads them through the kernel, under the names
 * GRUB gives them, which grub.cfg files and grub-mkconfig's search hints
 * use: (md/NAME) and (mduuid/UUID) for an array, (lvm/VG-LV) and
 * (lvmid/VGUUID/LVUUID) for a volume (grub-emu's device map, GRUB patch
 * 0028).  Only the names are worked out here: what the kernel shows in
 * sysfs, and what libblkid reads in an array's member.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libnmbl.h"
#include "nmbl-private.h"

/* The member signatures of what GRUB would assemble. */
static const struct {
	const char *blkid;
	unsigned kind;
} member_types[] = {
	{ "linux_raid_member", NMBL_VOLUMES_MD },
	{ "LVM2_member", NMBL_VOLUMES_LVM },
};

static unsigned member_kind(const char *path)
{
	static char *only[] = { "linux_raid_member", "LVM2_member", NULL };
	_cleanup_blkid_probe_ blkid_probe pr = NULL;
	const char *type;

	pr = blkid_new_probe_from_filename(path);
	if (!pr || blkid_probe_enable_superblocks(pr, 1) < 0 ||
	    blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE) < 0 ||
	    blkid_probe_filter_superblocks_type(pr, BLKID_FLTR_ONLYIN, only) < 0 ||
	    blkid_do_safeprobe(pr) != 0 || blkid_probe_lookup_value(pr, "TYPE", &type, NULL) < 0)
		return 0;
	for (size_t i = 0; i < ELEMENTSOF(member_types); i++)
		if (strcmp(type, member_types[i].blkid) == 0)
			return member_types[i].kind;
	return 0;
}

static int add_member_kind(const char *dev, const char *name, void *userdata)
{
	(void)name;
	*(unsigned *)userdata |= member_kind(dev);
	return 0;
}

int nmbl_find_volume_members(struct nmbl_ctx *ctx, unsigned *ret_kinds)
{
	unsigned kinds = 0;
	int r;

	if (!ctx || !ret_kinds)
		return -EINVAL;
	r = nmbl_each_block_device(ctx, add_member_kind, &kinds);
	if (r < 0)
		return r;
	*ret_kinds = kinds;
	return 0;
}

/* An LVM UUID as LVM writes it in its metadata, and GRUB names it:
 * 32 characters in groups of 6-4-4-4-4-4-6. */
#define LVM_ID_LEN 32
#define LVM_ID_TEXT_LEN (LVM_ID_LEN + 6)

static void lvm_id_text(const char *id, char ret[LVM_ID_TEXT_LEN + 1])
{
	static const unsigned groups[] = { 6, 4, 4, 4, 4, 4, 6 };
	char *o = ret;

	for (size_t g = 0; g < ELEMENTSOF(groups); g++) {
		if (g > 0)
			*o++ = '-';
		memcpy(o, id, groups[g]);
		o += groups[g];
		id += groups[g];
	}
	*o = '\0';
}

static bool valid_lvm_id(const char *s)
{
	for (size_t i = 0; i < LVM_ID_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

/* A name in a device map line: GRUB's, between parentheses, so none of
 * those nor white space (which device-mapper allows in names). */
static bool valid_map_name(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s <= ' ' || *s == '(' || *s == ')' || *s == ',' || *s == '\\' || *s == 0x7f)
			return false;
	return true;
}

int nmbl_lvm_map_names(const char *dm_name, const char *dm_uuid, char **ret_name,
		       char **ret_id_name)
{
	char vg[LVM_ID_TEXT_LEN + 1], lv[LVM_ID_TEXT_LEN + 1];
	_cleanup_free_ char *name = NULL, *id_name = NULL;

	/* "LVM-" and the two UUIDs; a volume LVM made for its own use (a
	 * snapshot's origin, a RAID image) has a suffix: not GRUB's. */
	if (strncmp(dm_uuid, "LVM-", 4) != 0 || strlen(dm_uuid) != 4 + 2 * LVM_ID_LEN ||
	    !valid_lvm_id(dm_uuid + 4) || !valid_lvm_id(dm_uuid + 4 + LVM_ID_LEN) ||
	    !valid_map_name(dm_name))
		return -EINVAL;
	lvm_id_text(dm_uuid + 4, vg);
	lvm_id_text(dm_uuid + 4 + LVM_ID_LEN, lv);
	/* device-mapper's name is GRUB's: VG-LV, their dashes doubled. */
	if (asprintf(&name, "lvm/%s", dm_name) < 0 ||
	    asprintf(&id_name, "lvmid/%s/%s", vg, lv) < 0)
		return -ENOMEM;
	*ret_name = TAKE_PTR(name);
	*ret_id_name = TAKE_PTR(id_name);
	return 0;
}

int nmbl_md_map_names(const char *label, const char *uuid, char **ret_name, char **ret_id_name)
{
	_cleanup_free_ char *name = NULL, *id_name = NULL;
	char hex[33];
	size_t n = 0;

	/* libblkid's UUID of a member is the array's, with dashes or (0.90)
	 * colons: GRUB's is its 16 bytes in lower-case hex. */
	for (const char *s = uuid; *s; s++) {
		if (*s == '-' || *s == ':')
			continue;
		if (n == 32 || !((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') ||
				 (*s >= 'A' && *s <= 'F')))
			return -EINVAL;
		hex[n++] = (char)(*s >= 'A' && *s <= 'F' ? *s - 'A' + 'a' : *s);
	}
	if (n != 32)
		return -EINVAL;
	hex[n] = '\0';
	/* GRUB strips the host a 1.x array's name begins with.  0.90 arrays
	 * have no name: GRUB names them by number, which only the UUID
	 * name here stands for. */
	if (label && *label) {
		const char *colon = strchr(label, ':');

		if (!valid_map_name(colon ? colon + 1 : label))
			return -EINVAL;
		if (asprintf(&name, "md/%s", colon ? colon + 1 : label) < 0)
			return -ENOMEM;
	}
	if (asprintf(&id_name, "mduuid/%s", hex) < 0)
		return -ENOMEM;
	*ret_name = TAKE_PTR(name);
	*ret_id_name = TAKE_PTR(id_name);
	return 0;
}

/* The array's name and UUID, as its first member's superblock says. */
static int md_names(const struct nmbl_ctx *ctx, const char *md, char **ret_name,
		    char **ret_id_name)
{
	_cleanup_free_ char *slaves = NULL, *dev = NULL;
	_cleanup_blkid_probe_ blkid_probe pr = NULL;
	const char *label = NULL, *uuid;
	struct dirent *de;
	DIR *d;

	if (asprintf(&slaves, "%s/sys/class/block/%s/slaves", ctx->root, md) < 0)
		return -ENOMEM;
	d = opendir(slaves);
	if (!d)
		return -errno;
	while ((de = readdir(d)) && !nmbl_valid_block_name(de->d_name))
		;
	if (de && asprintf(&dev, "%s/dev/%s", ctx->root, de->d_name) < 0)
		dev = NULL;
	closedir(d);
	if (!dev)
		return -ENODEV;
	pr = blkid_new_probe_from_filename(dev);
	if (!pr)
		return errno > 0 ? -errno : -EIO;
	if (blkid_probe_enable_superblocks(pr, 1) < 0 ||
	    blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL |
							  BLKID_SUBLKS_UUID) < 0)
		return -ENOMEM;
	if (blkid_do_safeprobe(pr) != 0 || blkid_probe_lookup_value(pr, "UUID", &uuid, NULL) < 0)
		return -ENODEV;
	(void)blkid_probe_lookup_value(pr, "LABEL", &label, NULL);
	return nmbl_md_map_names(label, uuid, ret_name, ret_id_name);
}

static int dm_names(const struct nmbl_ctx *ctx, const char *dm, char **ret_name,
		    char **ret_id_name)
{
	_cleanup_free_ char *name_path = NULL, *uuid_path = NULL;
	char name[256], uuid[256];
	int r;

	if (asprintf(&name_path, "/sys/class/block/%s/dm/name", dm) < 0 ||
	    asprintf(&uuid_path, "/sys/class/block/%s/dm/uuid", dm) < 0)
		return -ENOMEM;
	r = nmbl_read_small(ctx, name_path, name, sizeof(name));
	if (r >= 0)
		r = nmbl_read_small(ctx, uuid_path, uuid, sizeof(uuid));
	if (r < 0)
		return r;
	return nmbl_lvm_map_names(name, uuid, ret_name, ret_id_name);
}

static bool md_running(const struct nmbl_ctx *ctx, const char *md)
{
	_cleanup_free_ char *path = NULL;
	char state[32];

	return asprintf(&path, "/sys/class/block/%s/md/array_state", md) >= 0 &&
	       nmbl_read_small(ctx, path, state, sizeof(state)) >= 0 &&
	       strcmp(state, "inactive") != 0 && strcmp(state, "clear") != 0;
}

int nmbl_write_volume_map(struct nmbl_ctx *ctx, FILE *f)
{
	_cleanup_free_ char *dir = NULL;
	struct dirent **list;
	int n, named = 0;

	if (!ctx || !f)
		return -EINVAL;
	dir = nmbl_path(ctx, "/sys/class/block");
	if (!dir)
		return -ENOMEM;
	n = scandir(dir, &list, NULL, versionsort);
	if (n < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		const char *dev = list[i]->d_name;
		_cleanup_free_ char *name = NULL, *id_name = NULL;
		int r = -ENODEV;

		if (strncmp(dev, "md", 2) == 0 && md_running(ctx, dev))
			r = md_names(ctx, dev, &name, &id_name);
		else if (strncmp(dev, "dm-", 3) == 0)
			r = dm_names(ctx, dev, &name, &id_name);
		if (r < 0) {
			if (r != -ENODEV && r != -EINVAL)
				nmbl_dbg(ctx, "naming /dev/%s for the menu: %s", dev, strerror(-r));
		} else if (nmbl_valid_block_name(dev)) {
			if (name)
				fprintf(f, "(%s) /dev/%s\n", name, dev);
			fprintf(f, "(%s) /dev/%s\n", id_name, dev);
			named++;
		}
	}
	for (int i = 0; i < n; i++)
		free(list[i]);
	free(list);
	return ferror(f) ? -EIO : named;
}
