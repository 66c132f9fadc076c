/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * What udev would do for nmbl's initramfs, and no more: a device the
 * kernel adds gets its module, a block device its /dev/disk/by-* links
 * (libblkid reads the superblock and the partition entry, as udev's blkid
 * builtin does, and spells the names as udev does).
 */
#include <blkid/blkid.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "nmbl-private.h"

int nmbl_uevent_parse(const char *msg, size_t len, struct nmbl_uevent *ret)
{
	struct nmbl_uevent ev = {};
	const char *p, *end = msg + len;

	/* "ACTION@DEVPATH", then KEY=VALUE, each ending in a NUL. */
	if (len == 0 || len > NMBL_UEVENT_MAX || msg[len - 1] != '\0')
		return -EBADMSG;
	if (!memchr(msg, '@', strlen(msg)))
		return -EBADMSG;
	for (p = msg + strlen(msg) + 1; p < end; p += strlen(p) + 1) {
		static const struct {
			const char *key;
			size_t offset;
		} keys[] = {
			{ "ACTION=", offsetof(struct nmbl_uevent, action) },
			{ "SUBSYSTEM=", offsetof(struct nmbl_uevent, subsystem) },
			{ "DEVNAME=", offsetof(struct nmbl_uevent, devname) },
			{ "MODALIAS=", offsetof(struct nmbl_uevent, modalias) },
		};

		for (size_t i = 0; i < ELEMENTSOF(keys); i++)
			if (strncmp(p, keys[i].key, strlen(keys[i].key)) == 0)
				*(const char **)((char *)&ev + keys[i].offset) =
					p + strlen(keys[i].key);
	}
	if (!ev.action || !*ev.action)
		return -EBADMSG;
	*ret = ev;
	return 0;
}

char *nmbl_udev_encode(const char *value)
{
	size_t size = strlen(value) * 4 + 1;
	char *enc = malloc(size);

	/* "/" comes out as \x2f; "." and ".." would name directories. */
	if (enc && (blkid_encode_string(value, enc, size) < 0 || !*enc ||
		    strcmp(enc, ".") == 0 || strcmp(enc, "..") == 0)) {
		free(enc);
		return NULL;
	}
	return enc;
}

static int make_link(const struct nmbl_ctx *ctx, const char *dir, const char *value,
		     const char *name)
{
	_cleanup_free_ char *enc = NULL, *disk = NULL, *sub = NULL, *link = NULL, *target = NULL;

	enc = nmbl_udev_encode(value);
	if (!enc)
		return -EINVAL;
	disk = nmbl_path(ctx, "/dev/disk");
	if (!disk || asprintf(&sub, "%s/%s", disk, dir) < 0 ||
	    asprintf(&link, "%s/%s", sub, enc) < 0 || asprintf(&target, "../../%s", name) < 0)
		return -ENOMEM;
	if ((mkdir(disk, 0755) < 0 && errno != EEXIST) || (mkdir(sub, 0755) < 0 && errno != EEXIST))
		return -errno;
	/* The newest device of a name wins, as with udev's equal priorities. */
	if (unlink(link) < 0 && errno != ENOENT)
		return -errno;
	if (symlink(target, link) < 0)
		return -errno;
	nmbl_dbg(ctx, "/dev/disk/%s/%s -> %s", dir, enc, name);
	return 0;
}

NMBL_EXPORT int nmbl_link_block_device(struct nmbl_ctx *ctx, const char *name)
{
	static const struct {
		const char *tag, *dir;
	} links[] = {
		{ "UUID", "by-uuid" },
		{ "LABEL", "by-label" },
		{ "PART_ENTRY_UUID", "by-partuuid" },
		{ "PART_ENTRY_NAME", "by-partlabel" },
	};
	_cleanup_blkid_probe_ blkid_probe pr = NULL;
	_cleanup_free_ char *dev = NULL;
	char rel[NMBL_NAME_MAX + sizeof("/dev/")];
	int r = 0;

	if (!ctx || !name || !nmbl_valid_block_name(name))
		return -EINVAL;
	snprintf(rel, sizeof(rel), "/dev/%s", name);
	dev = nmbl_path(ctx, rel);
	if (!dev)
		return -ENOMEM;
	errno = 0;
	pr = blkid_new_probe_from_filename(dev);
	if (!pr)
		return errno ? -errno : -ENOMEM;
	if (blkid_probe_enable_superblocks(pr, 1) < 0 ||
	    blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_LABEL | BLKID_SUBLKS_UUID |
							  BLKID_SUBLKS_TYPE) < 0 ||
	    blkid_probe_enable_partitions(pr, 1) < 0 ||
	    blkid_probe_set_partitions_flags(pr, BLKID_PARTS_ENTRY_DETAILS) < 0)
		return -ENOMEM;
	/* Nothing found, or two signatures that disagree: no links, as udev. */
	if (blkid_do_safeprobe(pr) != 0)
		return 0;
	for (size_t i = 0; i < ELEMENTSOF(links); i++) {
		const char *value;
		int k;

		if (blkid_probe_lookup_value(pr, links[i].tag, &value, NULL) < 0)
			continue;
		k = make_link(ctx, links[i].dir, value, name);
		if (k < 0 && r == 0)
			r = k;
	}
	return r;
}

NMBL_EXPORT int nmbl_handle_uevent(struct nmbl_ctx *ctx, const void *msg, size_t len)
{
	struct nmbl_uevent ev;
	int r;

	if (!ctx || !msg)
		return -EINVAL;
	r = nmbl_uevent_parse(msg, len, &ev);
	if (r < 0)
		return r;
	if (strcmp(ev.action, "add") != 0)
		return 0;
	if (ev.modalias && *ev.modalias) {
		r = nmbl_load_module(ctx, ev.modalias);
		/* No module for a device is the common case. */
		if (r < 0 && r != -ENOENT)
			return r;
	}
	if (ev.subsystem && strcmp(ev.subsystem, "block") == 0 && ev.devname)
		return nmbl_link_block_device(ctx, ev.devname);
	return 0;
}
