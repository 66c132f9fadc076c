/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
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

int nmbl_each_block_device(const struct nmbl_ctx *ctx,
			   int (*fn)(const char *dev, const char *name, void *userdata),
			   void *userdata)
{
	_cleanup_free_ char *dir = nmbl_path(ctx, "/sys/class/block");
	struct dirent *de;
	int r = 0;
	DIR *d;

	if (!dir)
		return -ENOMEM;
	d = opendir(dir);
	if (!d)
		return -errno;
	while (r == 0 && (de = readdir(d))) {
		_cleanup_free_ char *dev = NULL;

		if (!nmbl_valid_block_name(de->d_name))
			continue;
		if (asprintf(&dev, "%s/dev/%s", ctx->root, de->d_name) < 0) {
			r = -ENOMEM;
			break;
		}
		r = fn(dev, de->d_name, userdata);
	}
	closedir(d);
	return r;
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
 * libblkid's names of the file systems nmbl boots from, and the type
 * mount(2) is asked for, so that the kernel loads the right module at
 * once: the ext4 driver mounts ext2 and ext3 as well, with the same
 * read-only options.
 */
static const struct {
	const char *blkid, *fstype;
} fs_types[] = {
	{ "ext4", "ext4" }, { "ext3", "ext4" }, { "ext2", "ext4" }, { "ext4dev", "ext4" },
	{ "btrfs", "btrfs" }, { "xfs", "xfs" }, { "vfat", "vfat" },
};

/* What an initrd sets up before the file system inside appears, as the
 * reasons for a kexec name it. */
static const struct {
	const char *blkid, *what;
} stacked_types[] = {
	{ "crypto_LUKS", "LUKS" },
	{ "LVM2_member", "LVM" }, { "LVM1_member", "LVM" },
	{ "linux_raid_member", "RAID (md)" },
	{ "isw_raid_member", "RAID (Intel firmware)" },
	{ "ddf_raid_member", "RAID (DDF firmware)" },
	{ "bcache", "bcache" }, { "vdo", "VDO" }, { "stratis", "Stratis" },
	{ "BitLocker", "BitLocker" },
};

static const char *fstype_of(const char *type)
{
	for (size_t i = 0; i < ELEMENTSOF(fs_types); i++)
		if (strcmp(type, fs_types[i].blkid) == 0)
			return fs_types[i].fstype;
	return NULL;
}

/* Any RAID or encryption libblkid knows counts, named or not: nmbl's
 * initramfs sets up none of them. */
static const char *stacked_of(const char *type, const char *usage)
{
	for (size_t i = 0; i < ELEMENTSOF(stacked_types); i++)
		if (strcmp(type, stacked_types[i].blkid) == 0)
			return stacked_types[i].what;
	if (usage && strcmp(usage, "raid") == 0)
		return "RAID (firmware)";
	if (usage && strcmp(usage, "crypto") == 0)
		return "an encrypted volume";
	return NULL;
}

/* btrfs counts its devices in its primary superblock, at 64 KiB, a field
 * libblkid does not report: read after its magic, bounds and all. */
#define BTRFS_SUPER_OFFSET 0x10000
#define BTRFS_MAGIC_OFFSET 0x40
#define BTRFS_NUM_DEVICES_OFFSET 0x88

static int btrfs_n_devices(int fd, uint64_t offset, uint64_t *ret)
{
	unsigned char sb[BTRFS_NUM_DEVICES_OFFSET + 8];
	uint64_t n;
	ssize_t len;

	if (lseek(fd, (off_t)(offset + BTRFS_SUPER_OFFSET), SEEK_SET) < 0)
		return -errno;
	len = nmbl_read_full(fd, sb, sizeof(sb));
	if (len < 0)
		return (int)len;
	if ((size_t)len < sizeof(sb) || memcmp(sb + BTRFS_MAGIC_OFFSET, "_BHRfS_M", 8) != 0)
		return -EBADMSG;
	n = nmbl_le64(sb + BTRFS_NUM_DEVICES_OFFSET);
	if (n == 0)
		return -EBADMSG;
	*ret = n;
	return 0;
}

static int blkid_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

/*
 * The file system comes from libblkid's safe probe, as mount(8) and udev
 * take it: none when two signatures disagree, none on a RAID member or
 * LUKS.  The stacked layer and a hibernated system are looked for among
 * every signature on the device, so that a second signature cannot hide
 * them.
 */
static int probe_fd(int fd, uint64_t offset, struct nmbl_probe *ret)
{
	_cleanup_blkid_probe_ blkid_probe pr = NULL;
	struct nmbl_probe p = { .n_devices = 1 };
	const char *type, *usage;
	int r;

	pr = blkid_new_probe();
	if (!pr)
		return -ENOMEM;
	errno = 0;
	if (blkid_probe_set_device(pr, fd, (blkid_loff_t)offset, 0) != 0)
		return blkid_errno();
	if (blkid_probe_enable_superblocks(pr, 1) < 0 ||
	    blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE) < 0)
		return -ENOMEM;

	while ((r = blkid_do_probe(pr)) == 0) {
		if (blkid_probe_lookup_value(pr, "TYPE", &type, NULL) < 0)
			continue;
		if (blkid_probe_lookup_value(pr, "USAGE", &usage, NULL) < 0)
			usage = NULL;
		if (!p.stacked)
			p.stacked = stacked_of(type, usage);
		if (strcmp(type, "swsuspend") == 0)
			p.hibernated = true;
	}
	if (r < 0)
		return blkid_errno();

	blkid_reset_probe(pr);
	r = blkid_do_safeprobe(pr);
	if (r == -1)
		return blkid_errno();
	if (r == 0 && blkid_probe_lookup_value(pr, "TYPE", &type, NULL) == 0)
		p.fstype = fstype_of(type);
	if (p.fstype && strcmp(p.fstype, "btrfs") == 0) {
		r = btrfs_n_devices(fd, offset, &p.n_devices);
		if (r < 0)
			return r;
	}
	*ret = p;
	return 0;
}

int nmbl_probe_path(const char *path, uint64_t offset, struct nmbl_probe *ret)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	return probe_fd(fd, offset, ret);
}

/* Only swsuspend, libblkid's one read of a swap's first page: a scan of
 * every disk for a hibernated system costs one read a device. */
int nmbl_probe_hibernated(const char *path)
{
	static char *only[] = { "swsuspend", NULL };
	_cleanup_blkid_probe_ blkid_probe pr = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	const char *type;
	int r;

	if (fd < 0)
		return -errno;
	pr = blkid_new_probe();
	if (!pr)
		return -ENOMEM;
	errno = 0;
	if (blkid_probe_set_device(pr, fd, 0, 0) != 0)
		return blkid_errno();
	if (blkid_probe_enable_superblocks(pr, 1) < 0 ||
	    blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE) < 0 ||
	    blkid_probe_filter_superblocks_type(pr, BLKID_FLTR_ONLYIN, only) < 0)
		return -ENOMEM;
	r = blkid_do_safeprobe(pr);
	if (r == -1)
		return blkid_errno();
	return r == 0 && blkid_probe_lookup_value(pr, "TYPE", &type, NULL) == 0 &&
	       strcmp(type, "swsuspend") == 0;
}

int nmbl_probe_buffer(const void *buf, size_t len, struct nmbl_probe *ret)
{
	_cleanup_close_ int fd = -1;
	int r;

	r = nmbl_memfd_of("nmbl-probe", buf, len, &fd);
	if (r < 0)
		return r;
	return probe_fd(fd, 0, ret);
}

int nmbl_probe_device(const struct nmbl_ctx *ctx, const char *dev,
		      const char **ret_fstype, uint64_t *ret_n_devices)
{
	struct nmbl_probe p;
	int r;

	r = nmbl_probe_path(dev, 0, &p);
	if (r < 0)
		return r;
	nmbl_dbg(ctx, "%s: %s", dev, p.fstype ? p.fstype : "unknown file system");
	*ret_fstype = p.fstype;
	*ret_n_devices = p.n_devices;
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

int nmbl_partition_name(const struct nmbl_ctx *ctx, const char *disk, uint64_t start,
			char *ret_name, size_t size)
{
	const char *name = strrchr(disk, '/');

	name = name ? name + 1 : disk;
	if (!nmbl_valid_block_name(name) || strlen(name) >= size)
		return -EINVAL;
	if (start != 0)
		return nmbl_find_partition(ctx, name, start, ret_name, size);
	strcpy(ret_name, name);
	return 0;
}

NMBL_EXPORT int nmbl_mount_partition(struct nmbl_ctx *ctx, const char *disk,
				     uint64_t start, char **ret_mountpoint)
{
	char part[NMBL_NAME_MAX];
	_cleanup_free_ char *dev = NULL, *target = NULL, *mountdir = NULL;
	struct nmbl_mount *m;
	int r;

	if (!ctx || !disk || !ret_mountpoint)
		return -EINVAL;
	r = nmbl_partition_name(ctx, disk, start, part, sizeof(part));
	if (r < 0)
		return r;
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

/* GRUB's name for DEV's partition table: "gpt", "msdos". */
static int grub_table_name(const char *dev, const char **ret)
{
	_cleanup_blkid_probe_ blkid_probe pr = NULL;
	const char *type;
	int r;

	r = nmbl_probe_partition_table(dev, &pr, &type);
	if (r < 0)
		return r;
	if (strcmp(type, "gpt") == 0)
		*ret = "gpt";
	else if (strcmp(type, "dos") == 0)
		*ret = "msdos";
	else
		return -ENOTBLK;
	return 0;
}

/* PART's disk ("vda" for "vda1"), from the partition's place in sysfs. */
static int parent_disk(const struct nmbl_ctx *ctx, const char *part, char ret[NMBL_NAME_MAX])
{
	_cleanup_free_ char *link = NULL, *path = NULL;
	char target[PATH_MAX];
	const char *slash, *prev;
	ssize_t n;

	if (asprintf(&path, "%s/sys/class/block/%s", ctx->root, part) < 0)
		return -ENOMEM;
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	/* ".../block/vda/vda1" */
	slash = strrchr(target, '/');
	if (!slash || slash == target)
		return -ENODEV;
	for (prev = slash - 1; prev > target && *prev != '/'; prev--)
		;
	if ((size_t)(slash - prev - 1) >= NMBL_NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(ret, prev + 1, (size_t)(slash - prev - 1));
	ret[slash - prev - 1] = '\0';
	return nmbl_valid_block_name(ret) ? 0 : -ENODEV;
}

static int read_partition_u64(const struct nmbl_ctx *ctx, const char *part, const char *what,
			      uint64_t *ret)
{
	char path[sizeof("/sys/class/block//") + NMBL_NAME_MAX + 16];

	snprintf(path, sizeof(path), "/sys/class/block/%s/%s", part, what);
	return nmbl_read_u64(ctx, path, ret);
}

/* The mount nmbl_mount_partition() made at PATH, undone. */
static void umount_ours(struct nmbl_ctx *ctx, const char *path)
{
	for (struct nmbl_mount **m = &ctx->mounts; *m; m = &(*m)->next) {
		struct nmbl_mount *found = *m;

		if (strcmp(found->path, path) != 0)
			continue;
		(void)nmbl_sys_umount(found->path);
		*m = found->next;
		free(found->path);
		free(found);
		return;
	}
}

NMBL_EXPORT int nmbl_find_esp_grub_dir(struct nmbl_ctx *ctx, const char *const *dirs,
				       size_t n_dirs, char **ret_disk, char **ret_partition,
				       const char **ret_dir)
{
	_cleanup_free_ char *uuid = NULL, *link = NULL, *dev = NULL, *disk = NULL, *mnt = NULL,
			    *partition = NULL;
	char part[NMBL_NAME_MAX], name[NMBL_NAME_MAX], *resolved;
	const char *table, *found = NULL;
	uint64_t number, start;
	bool was_mounted;
	int r;

	if (!ctx || (n_dirs && !dirs) || !ret_disk || !ret_partition || !ret_dir)
		return -EINVAL;
	r = nmbl_get_loader_device_partuuid(ctx, &uuid);
	if (r < 0)
		return r == -ENOENT || r == -EBADMSG ? -ENOENT : r;
	if (asprintf(&link, "%s/dev/disk/by-partuuid/%s", ctx->root, uuid) < 0)
		return -ENOMEM;
	resolved = realpath(link, NULL);
	if (!resolved)
		return errno == ENOENT ? -ENOENT : -errno;
	snprintf(part, sizeof(part), "%s", strrchr(resolved, '/') + 1);
	free(resolved);
	if (!nmbl_valid_block_name(part))
		return -ENOENT;
	r = parent_disk(ctx, part, name);
	if (r < 0)
		return r;
	r = read_partition_u64(ctx, part, "partition", &number);
	if (r >= 0)
		r = read_partition_u64(ctx, part, "start", &start);
	if (r < 0)
		return r;
	if (asprintf(&dev, "%s/dev/%s", ctx->root, name) < 0 ||
	    asprintf(&disk, "/dev/%s", name) < 0)
		return -ENOMEM;
	r = grub_table_name(dev, &table);
	if (r < 0)
		return r;
	if (asprintf(&partition, "%s%" PRIu64, table, number) < 0)
		return -ENOMEM;
	{
		_cleanup_free_ char *target = NULL;

		if (asprintf(&target, "%s%s/%s", ctx->root, NMBL_MOUNT_DIR, part) < 0)
			return -ENOMEM;
		was_mounted = already_ours(ctx, target);
	}
	r = nmbl_mount_partition(ctx, disk, start, &mnt);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_dirs && !found; i++) {
		_cleanup_free_ char *cfg = NULL;
		struct stat st;

		if (asprintf(&cfg, "%s%s/grub.cfg", mnt, dirs[i]) < 0) {
			r = -ENOMEM;
			break;
		}
		if (stat(cfg, &st) == 0 && S_ISREG(st.st_mode))
			found = dirs[i];
	}
	if (!was_mounted)
		umount_ours(ctx, mnt);
	if (r < 0)
		return r;
	if (!found)
		return -ENOENT;
	*ret_disk = TAKE_PTR(disk);
	*ret_partition = TAKE_PTR(partition);
	*ret_dir = found;
	return 0;
}
