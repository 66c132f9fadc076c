/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "nmbl-private.h"

/* Partition names are short ("nvme0n1p15"); anything else is not ours. */

bool nmbl_valid_block_name(const char *name)
{
	size_t len = strlen(name);

	return len > 0 && len < NMBL_NAME_MAX && !strchr(name, '/') &&
	       strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int nmbl_read_u64(const struct nmbl_ctx *ctx, const char *path, uint64_t *ret)
{
	char buf[32], *end;
	unsigned long long v;
	int r;

	r = nmbl_read_small(ctx, path, buf, sizeof(buf));
	if (r < 0)
		return r;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || end == buf || *end)
		return -EBADMSG;
	*ret = v;
	return 0;
}

/*
 * The name of DISK's partition that starts at START, from sysfs: the same
 * numbers GRUB read from the partition table, so no table is parsed twice.
 */
int nmbl_find_partition(const struct nmbl_ctx *ctx, const char *disk, uint64_t start,
			char *ret_name, size_t size)
{
	_cleanup_free_ char *dir = NULL;
	char sub[sizeof("/sys/class/block//start") + 2 * 256];
	struct dirent *de;
	DIR *d;
	int r = -ENXIO;

	if (asprintf(&dir, "%s/sys/class/block/%s", ctx->root, disk) < 0)
		return -ENOMEM;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		uint64_t s;

		if (!nmbl_valid_block_name(de->d_name) ||
		    strncmp(de->d_name, disk, strlen(disk)) != 0)
			continue;
		snprintf(sub, sizeof(sub), "/sys/class/block/%s/%s/start",
			 disk, de->d_name);
		if (nmbl_read_u64(ctx, sub, &s) < 0 || s != start)
			continue;
		if (strlen(de->d_name) >= size) {
			r = -ENAMETOOLONG;
			break;
		}
		strcpy(ret_name, de->d_name);
		r = 0;
		break;
	}
	closedir(d);
	return r;
}

/* Options that keep a read-only mount from writing: a boot loader must not
 * replay a journal (the file system may belong to a hibernated system).
 * btrfs spells it rescue=nologreplay since Linux 5.9 and no longer takes
 * the old nologreplay (6.18: "Unknown parameter"); older kernels take only
 * the old spelling, which is the fallback. */
static const char *ro_options(const char *fstype, bool fallback)
{
	if (strcmp(fstype, "ext4") == 0 || strcmp(fstype, "ext3") == 0 ||
	    strcmp(fstype, "xfs") == 0)
		return "norecovery";
	if (strcmp(fstype, "btrfs") == 0)
		return fallback ? "nologreplay" : "rescue=nologreplay";
	return NULL;
}

/*
 * The file system types nmbl boots from, told by their superblock magic,
 * so that mount(2) is asked for the right type at once and the kernel
 * loads its module on demand.  BUF holds the start of the device.
 */
const char *nmbl_probe_fstype(const void *buf, size_t len)
{
	const unsigned char *b = buf;

	if (len >= 0x10048 && memcmp(b + 0x10040, "_BHRfS_M", 8) == 0)
		return "btrfs";
	if (len >= 1082 && b[1080] == 0x53 && b[1081] == 0xef)
		return "ext4";
	if (len >= 4 && memcmp(b, "XFSB", 4) == 0)
		return "xfs";
	if (len >= 512 && b[510] == 0x55 && b[511] == 0xaa &&
	    (memcmp(b + 0x36, "FAT", 3) == 0 ||
	     memcmp(b + 0x52, "FAT32", 5) == 0))
		return "vfat";
	return NULL;
}

int nmbl_read_start(const char *path, void *buf, size_t size, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = nmbl_read_full(fd, buf, size);
	if (n < 0)
		return (int)n;
	*ret_len = (size_t)n;
	return 0;
}

int nmbl_probe_device(const struct nmbl_ctx *ctx, const char *dev,
		      const char **ret_fstype, uint64_t *ret_n_devices)
{
	_cleanup_free_ unsigned char *buf = NULL;
	size_t len;
	int r;

	buf = malloc(NMBL_PROBE_SIZE);
	if (!buf)
		return -ENOMEM;
	r = nmbl_read_start(dev, buf, NMBL_PROBE_SIZE, &len);
	if (r < 0)
		return r;
	*ret_fstype = nmbl_probe_fstype(buf, len);
	/* btrfs counts its devices in the superblock; the others have one. */
	*ret_n_devices = *ret_fstype && strcmp(*ret_fstype, "btrfs") == 0 && len >= 0x10090 ?
		nmbl_le64(buf + 0x10088) : 1;
	nmbl_dbg(ctx, "%s: %s", dev, *ret_fstype ? *ret_fstype : "unknown file system");
	return 0;
}

static int mount_type(const struct nmbl_ctx *ctx, const char *dev,
		      const char *target, const char *fstype)
{
	unsigned long flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
	int r;

	r = nmbl_sys_mount(dev, target, fstype, flags, ro_options(fstype, false));
	if (r == -EINVAL && strcmp(fstype, "btrfs") == 0)
		r = nmbl_sys_mount(dev, target, fstype, flags, ro_options(fstype, true));
	if (r == 0)
		nmbl_info(ctx, "mounted %s on %s (%s, read-only)", dev, target,
			  fstype);
	else
		nmbl_dbg(ctx, "mounting %s as %s: %s", dev, fstype, strerror(-r));
	return r;
}

/*
 * A known superblock names the type; otherwise try each block file system
 * the kernel has, as mount(8) does.
 */
static int mount_any(struct nmbl_ctx *ctx, const char *dev,
		     const char *target)
{
	char list[NMBL_SMALL_FILE_MAX], *line, *save = NULL;
	const char *fstype = NULL;
	uint64_t n_devices;
	int r, last = -ENODEV;

	r = nmbl_probe_device(ctx, dev, &fstype, &n_devices);
	if (r < 0)
		return r;
	if (fstype) {
		/* Only sooner: without it the kernel starts modprobe itself. */
		r = nmbl_load_fs_module(ctx, fstype);
		if (r < 0)
			nmbl_dbg(ctx, "module for %s: %s", fstype, strerror(-r));
		return mount_type(ctx, dev, target, fstype);
	}

	r = nmbl_read_small(ctx, "/proc/filesystems", list, sizeof(list));
	if (r < 0)
		return r;
	for (line = strtok_r(list, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "nodev", 5) == 0)
			continue;
		fstype = line + strspn(line, " \t");
		if (!*fstype)
			continue;
		r = mount_type(ctx, dev, target, fstype);
		if (r == 0)
			return 0;
		/* EINVAL: not this file system; keep the most telling error. */
		if (r != -EINVAL)
			last = r;
	}
	return last;
}

static bool already_ours(const struct nmbl_ctx *ctx, const char *path)
{
	const struct nmbl_mount *m;

	for (m = ctx->mounts; m; m = m->next)
		if (strcmp(m->path, path) == 0)
			return true;
	return false;
}

NMBL_EXPORT int nmbl_mount_partition(struct nmbl_ctx *ctx, const char *disk,
				     uint64_t start, char **ret_mountpoint)
{
	char part[NMBL_NAME_MAX];
	const char *name;
	_cleanup_free_ char *dev = NULL, *target = NULL, *mountdir = NULL;
	struct nmbl_mount *m;
	int r;

	if (!ctx || !disk || !ret_mountpoint)
		return -EINVAL;
	name = strrchr(disk, '/');
	name = name ? name + 1 : disk;
	if (!nmbl_valid_block_name(name))
		return -EINVAL;
	if (start == 0) {
		strcpy(part, name);
	} else {
		r = nmbl_find_partition(ctx, name, start, part, sizeof(part));
		if (r < 0)
			return r;
	}
	if (asprintf(&dev, "%s/dev/%s", ctx->root, part) < 0 ||
	    asprintf(&target, "%s%s/%s", ctx->root, NMBL_MOUNT_DIR, part) < 0)
		return -ENOMEM;
	if (already_ours(ctx, target))
		goto done;

	mountdir = nmbl_path(ctx, NMBL_MOUNT_DIR);
	if (!mountdir)
		return -ENOMEM;
	for (char *p = mountdir + strlen(ctx->root) + 1; (p = strchr(p, '/'));
	     p++) {
		*p = '\0';
		(void)mkdir(mountdir, 0700);
		*p = '/';
	}
	if (mkdir(mountdir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (mkdir(target, 0700) < 0 && errno != EEXIST)
		return -errno;
	r = mount_any(ctx, dev, target);
	if (r < 0)
		return r;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->path = strdup(target);
	if (!m->path) {
		free(m);
		return -ENOMEM;
	}
	m->next = ctx->mounts;
	ctx->mounts = m;
done:
	*ret_mountpoint = TAKE_PTR(target);
	return 0;
}

NMBL_EXPORT int nmbl_umount_all(struct nmbl_ctx *ctx)
{
	struct nmbl_mount *m;
	int r = 0;

	if (!ctx)
		return -EINVAL;
	while ((m = ctx->mounts)) {
		int k = nmbl_sys_umount(m->path);

		if (k < 0 && r == 0)
			r = k;
		ctx->mounts = m->next;
		free(m->path);
		free(m);
	}
	return r;
}
