/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Start an EFI program once, at the next boot, the way UEFI offers it to an
 * operating system: a load option (Boot####) for the program's file on its
 * GPT partition, and BootNext naming it.  The firmware checks the program's
 * signature under Secure Boot, then boots it, and the boot after that goes
 * by BootOrder again: to nmbl.  This is what GRUB's chainloader becomes
 * once boot services are gone.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nmbl-private.h"

#define GPT_HEADER_SIZE 92
#define GPT_MAX_ENTRIES 1024
#define GPT_MIN_ENTRY_SIZE 128
#define GPT_MAX_ENTRY_SIZE 4096

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EBADMSG;
		done += (size_t)n;
	}
	return 0;
}

/* The unique GUID of the GPT entry that starts at logical block FIRST, as
 * the partition table of DEV (LBS-byte blocks) says. */
static int gpt_partuuid(int fd, unsigned lbs, uint64_t first, char ret[37])
{
	unsigned char hdr[GPT_HEADER_SIZE], entry[GPT_MIN_ENTRY_SIZE];
	uint64_t table;
	uint32_t count, size;
	int r;

	r = pread_full(fd, hdr, sizeof(hdr), lbs);
	if (r < 0)
		return r;
	if (memcmp(hdr, "EFI PART", 8) != 0)
		return -ENOTBLK;
	table = nmbl_le64(hdr + 72);
	count = nmbl_le32(hdr + 80);
	size = nmbl_le32(hdr + 84);
	if (count > GPT_MAX_ENTRIES || size < GPT_MIN_ENTRY_SIZE ||
	    size > GPT_MAX_ENTRY_SIZE || size % 8 || table > UINT64_MAX / lbs)
		return -EBADMSG;
	for (uint32_t i = 0; i < count; i++) {
		r = pread_full(fd, entry, sizeof(entry), table * lbs + (uint64_t)i * size);
		if (r < 0)
			return r;
		if (nmbl_le64(entry + 32) != first)
			continue;
		nmbl_format_guid(entry + 16, false, ret);
		return 0;
	}
	return -ENXIO;
}

/* The load option for FILE on the partition of DISK that starts at START. */
static int build_option(struct nmbl_ctx *ctx, const char *disk, uint64_t start,
			const char *file, const char *description, void **ret, size_t *ret_len)
{
	char part[NMBL_NAME_MAX], path[3 * NMBL_NAME_MAX + 64], partuuid[37];
	_cleanup_free_ char *dev = NULL;
	_cleanup_close_ int fd = -1;
	uint64_t number, size, lbs;
	int r;

	r = nmbl_find_partition(ctx, disk, start, part, sizeof(part));
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/sys/class/block/%s/%s/partition", disk, part);
	r = nmbl_read_u64(ctx, path, &number);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/sys/class/block/%s/%s/size", disk, part);
	r = nmbl_read_u64(ctx, path, &size);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/sys/class/block/%s/queue/logical_block_size", disk);
	if (nmbl_read_u64(ctx, path, &lbs) < 0)
		lbs = 512;
	if (lbs < 512 || lbs > 65536 || lbs % 512 || number == 0 || number > UINT32_MAX)
		return -EBADMSG;
	if (asprintf(&dev, "%s/dev/%s", ctx->root, disk) < 0)
		return -ENOMEM;
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* sysfs counts 512-byte sectors; GPT and device paths count blocks. */
	r = gpt_partuuid(fd, (unsigned)lbs, start * 512 / lbs, partuuid);
	if (r < 0)
		return r;
	return nmbl_load_option_build(description, partuuid, (uint32_t)number,
				      start * 512 / lbs, size * 512 / lbs, file, ret, ret_len);
}

static bool same_target(const struct nmbl_load_option *a, const struct nmbl_load_option *b)
{
	const char *ua = nmbl_load_option_get_partuuid(a), *ub = nmbl_load_option_get_partuuid(b);
	const char *fa = nmbl_load_option_get_file(a), *fb = nmbl_load_option_get_file(b);

	/* FAT file names do not care about case. */
	return ua && ub && fa && fb && strcmp(ua, ub) == 0 && strcasecmp(fa, fb) == 0;
}

/* A Boot#### that already starts the program, else the lowest free number. */
static int choose_number(struct nmbl_ctx *ctx, const struct nmbl_load_option *want,
			 unsigned *ret, bool *ret_exists)
{
	static const char suffix[] = "-" NMBL_EFI_GLOBAL_GUID;
	_cleanup_free_ char *dir = nmbl_path(ctx, NMBL_EFIVARS);
	unsigned char used[0x10000 / 8] = { 0 };
	struct dirent *de;
	DIR *d;

	if (!dir)
		return -ENOMEM;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct nmbl_load_option *opt = NULL;
		unsigned n;
		char hex[5];

		if (strlen(de->d_name) != 8 + sizeof(suffix) - 1 ||
		    strncmp(de->d_name, "Boot", 4) != 0 ||
		    strcmp(de->d_name + 8, suffix) != 0)
			continue;
		memcpy(hex, de->d_name + 4, 4);
		hex[4] = '\0';
		if (strspn(hex, "0123456789ABCDEF") != 4)
			continue;
		n = (unsigned)strtoul(hex, NULL, 16);
		used[n / 8] |= (unsigned char)(1 << (n % 8));
		if (nmbl_read_boot_option(ctx, n, &opt) == 0 && same_target(opt, want)) {
			nmbl_load_option_free(opt);
			closedir(d);
			*ret = n;
			*ret_exists = true;
			return 0;
		}
		nmbl_load_option_free(opt);
	}
	closedir(d);
	for (unsigned n = 0; n < 0x10000; n++)
		if (!(used[n / 8] & (1 << (n % 8)))) {
			*ret = n;
			*ret_exists = false;
			return 0;
		}
	return -ENOSPC;
}

NMBL_EXPORT int nmbl_set_boot_next(struct nmbl_ctx *ctx, const char *disk, uint64_t start,
				   const char *file, const char *description,
				   unsigned *ret_number)
{
	_cleanup_free_ void *option = NULL;
	struct nmbl_load_option *want = NULL;
	const char *name;
	unsigned char next[2];
	unsigned number;
	bool exists;
	size_t len;
	int r;

	if (!ctx || !disk || !file || !description || start == 0)
		return -EINVAL;
	name = strrchr(disk, '/');
	name = name ? name + 1 : disk;
	if (!nmbl_valid_block_name(name))
		return -EINVAL;
	r = build_option(ctx, name, start, file, description, &option, &len);
	if (r < 0)
		return r;
	r = nmbl_load_option_parse(option, len, &want);
	if (r < 0)
		return r;
	r = choose_number(ctx, want, &number, &exists);
	nmbl_load_option_free(want);
	if (r < 0)
		return r;
	if (!exists) {
		char var[16];

		snprintf(var, sizeof(var), "Boot%04X", number);
		r = nmbl_efivar_write(ctx, NMBL_EFI_GLOBAL_GUID, var, option, len);
		if (r < 0)
			return r;
	}
	next[0] = (unsigned char)number;
	next[1] = (unsigned char)(number >> 8);
	r = nmbl_efivar_write(ctx, NMBL_EFI_GLOBAL_GUID, "BootNext", next, sizeof(next));
	if (r < 0)
		return r;
	if (ret_number)
		*ret_number = number;
	return 0;
}
