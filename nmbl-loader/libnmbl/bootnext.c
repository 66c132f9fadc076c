/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Start an EFI program once, at the next boot, the way UEFI offers it to an
 * operating system: a load option (Boot####) for the program's file on its
 * GPT partition, and BootNext naming it.  The firmware checks the program's
 * signature under Secure Boot, then boots it, and the boot after that goes
 * by BootOrder again: to nmbl.  This is what GRUB's chainloader becomes
 * once boot services are gone.
 *
 * Every Boot#### is a variable in the firmware's flash, which a grub.cfg
 * must not fill: a program that already has an option (Windows' own, say)
 * is started through it, and any other through one option that is nmbl's,
 * rewritten in place for each.  However many programs a menu chainloads,
 * nmbl adds at most one option.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nmbl-private.h"

int nmbl_probe_partition_table(const char *dev, blkid_probe *ret_probe, const char **ret_type)
{
	_cleanup_blkid_probe_ blkid_probe pr = NULL;
	const char *type;
	int r;

	errno = 0;
	pr = blkid_new_probe_from_filename(dev);
	if (!pr)
		return errno > 0 ? -errno : -ENOMEM;
	/* The table alone: a file system signature on the disk must not make
	 * libblkid ignore it. */
	if (blkid_probe_enable_superblocks(pr, 0) < 0 || blkid_probe_enable_partitions(pr, 1) < 0)
		return -ENOMEM;
	errno = 0;
	r = blkid_do_safeprobe(pr);
	if (r == -1)
		return errno > 0 ? -errno : -EIO;
	/* Two tables that disagree (a GPT and an MBR that is no protective
	 * one): the firmware goes by the MBR. */
	if (r == -2)
		return -EBADMSG;
	if (r == 1 || blkid_probe_lookup_value(pr, "PTTYPE", &type, NULL) < 0)
		return -ENOTBLK;
	*ret_type = type;
	*ret_probe = TAKE_PTR(pr);
	return 0;
}

int nmbl_gpt_partuuid(const char *dev, uint64_t start, char ret[37])
{
	_cleanup_blkid_probe_ blkid_probe pr = NULL;
	blkid_partlist list;
	blkid_parttable table;
	const char *type, *uuid;
	int r, n;

	r = nmbl_probe_partition_table(dev, &pr, &type);
	if (r < 0)
		return r;
	if (strcmp(type, "gpt") != 0)
		return -ENOTBLK;
	list = blkid_probe_get_partitions(pr);
	table = list ? blkid_partlist_get_table(list) : NULL;
	if (!table)
		return -EIO;
	n = blkid_partlist_numof_partitions(list);
	for (int i = 0; i < n; i++) {
		blkid_partition par = blkid_partlist_get_partition(list, i);

		/* libblkid counts 512-byte sectors, as sysfs does. */
		if (!par || blkid_partition_get_table(par) != table ||
		    blkid_partition_get_start(par) < 0 ||
		    (uint64_t)blkid_partition_get_start(par) != start)
			continue;
		uuid = blkid_partition_get_uuid(par);
		if (!uuid || strlen(uuid) != 36)
			return -EBADMSG;
		memcpy(ret, uuid, 37);
		nmbl_hex_lower(ret);
		return 0;
	}
	return -ENXIO;
}

int nmbl_boot_option_for(struct nmbl_ctx *ctx, const char *disk, uint64_t start,
			 const char *file, const char *description, const void *data,
			 size_t data_len, void **ret, size_t *ret_len)
{
	char part[NMBL_NAME_MAX], path[3 * NMBL_NAME_MAX + 64], partuuid[37];
	_cleanup_free_ char *dev = NULL;
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
	r = nmbl_gpt_partuuid(dev, start, partuuid);
	if (r < 0)
		return r;
	/* sysfs counts 512-byte sectors; device paths count blocks. */
	return nmbl_load_option_build_data(description, partuuid, (uint32_t)number,
					   start * 512 / lbs, size * 512 / lbs, file, data, data_len,
					   ret, ret_len);
}

static bool same_target(const struct nmbl_load_option *a, const struct nmbl_load_option *b)
{
	const char *ua = nmbl_load_option_get_partuuid(a), *ub = nmbl_load_option_get_partuuid(b);
	const char *fa = nmbl_load_option_get_file(a), *fb = nmbl_load_option_get_file(b);

	/* The partition by its GPT GUID; the file as the firmware opens it. */
	return ua && ub && fa && fb && strcasecmp(ua, ub) == 0 && nmbl_efi_path_equal(fa, fb);
}

/* The load options of A and B (what shim reads as its second stage's
 * name) as text, up to the first NUL: equal, or both empty. */
static bool same_arguments(const struct nmbl_load_option *a, const struct nmbl_load_option *b)
{
	_cleanup_free_ char *ta = NULL, *tb = NULL;
	const void *da, *db;
	size_t la = nmbl_load_option_get_optional_data(a, &da);
	size_t lb = nmbl_load_option_get_optional_data(b, &db);

	if (nmbl_utf16_to_utf8(la ? da : "", la, &ta) < 0 ||
	    nmbl_utf16_to_utf8(lb ? db : "", lb, &tb) < 0)
		return false;
	return strcmp(ta, tb) == 0;
}

bool nmbl_load_option_starts_same(const struct nmbl_load_option *a,
				  const struct nmbl_load_option *b)
{
	return same_target(a, b) && same_arguments(a, b);
}

#define BOOT_NUMBERS 0x10000
#define IS_USED(used, n) ((used)[(n) / 8] & (1 << ((n) % 8)))

/* Which Boot#### variables there are: bit N of USED for Boot<N>. */
static int boot_numbers_used(struct nmbl_ctx *ctx, unsigned char used[BOOT_NUMBERS / 8])
{
	static const char suffix[] = "-" NMBL_EFI_GLOBAL_GUID;
	_cleanup_free_ char *dir = nmbl_path(ctx, NMBL_EFIVARS);
	struct dirent *de;
	DIR *d;

	if (!dir)
		return -ENOMEM;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
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
	}
	closedir(d);
	return 0;
}

/*
 * The lowest Boot#### that starts what WANT starts, whatever its
 * description (nmbl_load_option_starts_same()); -ENOENT when none does.
 */
int nmbl_find_boot_option(struct nmbl_ctx *ctx, const struct nmbl_load_option *want,
			  unsigned *ret)
{
	unsigned char used[BOOT_NUMBERS / 8] = { 0 };
	int r = boot_numbers_used(ctx, used);

	if (r < 0)
		return r;
	for (unsigned n = 0; n < BOOT_NUMBERS; n++) {
		struct nmbl_load_option *opt = NULL;
		bool same;

		if (!IS_USED(used, n) || nmbl_read_boot_option(ctx, n, &opt) < 0)
			continue;
		same = nmbl_load_option_starts_same(opt, want);
		nmbl_load_option_free(opt);
		if (same) {
			*ret = n;
			return 0;
		}
	}
	return -ENOENT;
}

/*
 * The Boot#### to start the program WANT with: the lowest that already
 * starts it (*RET_SAME true), else the lowest whose description is
 * RESERVED (nmbl's own, to be rewritten), else the lowest free number.
 * WANT and RESERVED may be NULL: the lowest free number.
 */
static int choose_number(struct nmbl_ctx *ctx, const struct nmbl_load_option *want,
			 const char *reserved, unsigned *ret, bool *ret_same)
{
	unsigned char used[BOOT_NUMBERS / 8] = { 0 };
	unsigned own = BOOT_NUMBERS;
	int r = boot_numbers_used(ctx, used);

	if (r < 0)
		return r;
	for (unsigned n = 0; want && n < BOOT_NUMBERS; n++) {
		struct nmbl_load_option *opt = NULL;
		const char *desc;
		bool same;

		if (!IS_USED(used, n) || nmbl_read_boot_option(ctx, n, &opt) < 0)
			continue;
		desc = nmbl_load_option_get_description(opt);
		same = same_target(opt, want);
		if (!same && n < own && reserved && desc && strcmp(desc, reserved) == 0)
			own = n;
		nmbl_load_option_free(opt);
		if (same) {
			*ret_same = true;
			*ret = n;
			return 0;
		}
	}
	*ret_same = false;
	if (own < BOOT_NUMBERS) {
		*ret = own;
		return 0;
	}
	for (unsigned n = 0; n < BOOT_NUMBERS; n++)
		if (!IS_USED(used, n)) {
			*ret = n;
			return 0;
		}
	return -ENOSPC;
}

int nmbl_boot_option_free_number(struct nmbl_ctx *ctx, unsigned *ret)
{
	bool same;

	return choose_number(ctx, NULL, NULL, ret, &same);
}

/*
 * Never a loop.  A program the firmware refuses (Secure Boot) or that
 * fails sends the firmware on by BootOrder (UEFI 2.10, chapter 3), to
 * nmbl, whose default entry would chainload it again, and again.  The
 * firmware leaves no sign of it: it deletes BootNext before it tries the
 * option, and BootCurrent then names nmbl's own option, as it does after
 * an OS that started well and rebooted later; comparing BootCurrent with
 * the option cannot tell the two apart.  How many times the firmware
 * started since can: EDK2 (OVMF, and most PCs' firmware) counts its
 * starts in the MTC variable, the high half of the platform's monotonic
 * counter, one more at each start.  So nmbl records the option it set
 * and that count in its one NmblChainload variable, of one size,
 * overwritten.  Running at the count one higher, nmbl runs in the start
 * that was to run the option: the firmware came back without starting it
 * (or the program returned at once), and every chainloader of it in that
 * start says so instead of setting BootNext.  An OS that booted and
 * rebooted later leaves the count two or more higher: chainloaded again.
 * Without MTC, the first Linux boot after the record is taken to be the
 * one that came back, and refuses all through (by its boot id): a false
 * alarm after a good start at worst, never a loop.
 */
#define CHAIN_RECORD "NmblChainload"
#define CHAIN_RECORD_VERSION 1
#define CHAIN_HAS_COUNT 0x1
#define CHAIN_REFUSED 0x2
#define BOOT_ID_LEN 36
/* version, flags, number (LE16), count (LE32), boot id (text) */
#define CHAIN_RECORD_SIZE (8 + BOOT_ID_LEN)
#define EDK2_MTC_GUID "eb704011-1402-11d3-8e77-00a0c969723b"

struct chain_record {
	unsigned flags;
	unsigned number;
	uint32_t count;
	/* The Linux boot that set BootNext, or with CHAIN_REFUSED that
	 * refused it; "" when unknown. */
	char boot_id[BOOT_ID_LEN + 1];
};

/* What the machine is now: the firmware's start count, the Linux boot. */
static void chain_now(struct nmbl_ctx *ctx, struct chain_record *now)
{
	_cleanup_free_ char *mtc = NULL;
	char id[64];
	size_t len;

	*now = (struct chain_record){ 0 };
	if (nmbl_efivar_read(ctx, EDK2_MTC_GUID, "MTC", 4, &mtc, &len) == 0 && len == 4) {
		now->flags |= CHAIN_HAS_COUNT;
		now->count = nmbl_le32((const unsigned char *)mtc);
	}
	if (nmbl_read_small(ctx, "/proc/sys/kernel/random/boot_id", id, sizeof(id)) >= 0 &&
	    strlen(id) == BOOT_ID_LEN)
		memcpy(now->boot_id, id, sizeof(now->boot_id));
}

/* -ENOENT when there is none; anything malformed counts as none. */
static int chain_record_read(struct nmbl_ctx *ctx, struct chain_record *ret)
{
	_cleanup_free_ char *raw = NULL;
	const unsigned char *p;
	size_t len;
	int r;

	r = nmbl_efivar_read(ctx, NMBL_VENDOR_GUID, CHAIN_RECORD, CHAIN_RECORD_SIZE, &raw, &len);
	if (r == -EFBIG || r == -EBADMSG)
		return -ENOENT;
	if (r < 0)
		return r;
	p = (const unsigned char *)raw;
	if (len != CHAIN_RECORD_SIZE || p[0] != CHAIN_RECORD_VERSION ||
	    memchr(p + 8, '\0', BOOT_ID_LEN))
		return -ENOENT;
	*ret = (struct chain_record){
		.flags = p[1],
		.number = nmbl_le16(p + 2),
		.count = nmbl_le32(p + 4),
	};
	memcpy(ret->boot_id, p + 8, BOOT_ID_LEN);
	if (strspn(ret->boot_id, " ") == BOOT_ID_LEN)
		ret->boot_id[0] = '\0';
	return 0;
}

static int chain_record_write(struct nmbl_ctx *ctx, const struct chain_record *rec)
{
	unsigned char raw[CHAIN_RECORD_SIZE];

	raw[0] = CHAIN_RECORD_VERSION;
	raw[1] = (unsigned char)rec->flags;
	nmbl_put_le16(raw + 2, (uint16_t)rec->number);
	nmbl_put_le32(raw + 4, rec->count);
	/* Padded with spaces when unknown: one size, one variable, always. */
	memset(raw + 8, ' ', BOOT_ID_LEN);
	memcpy(raw + 8, rec->boot_id, strlen(rec->boot_id));
	return nmbl_efivar_write(ctx, NMBL_VENDOR_GUID, CHAIN_RECORD, raw, sizeof(raw));
}

static bool same_boot_id(const char *a, const char *b)
{
	return a[0] && strcmp(a, b) == 0;
}

/* Whether the firmware came back to nmbl instead of starting option
 * NUMBER, which nmbl set BootNext to as REC says. */
static bool came_back(const struct chain_record *rec, const struct chain_record *now,
		      unsigned number)
{
	if (rec->number != number)
		return false;
	if (rec->flags & CHAIN_HAS_COUNT && now->flags & CHAIN_HAS_COUNT)
		return now->count == rec->count + 1;
	if (rec->flags & CHAIN_REFUSED)
		return same_boot_id(rec->boot_id, now->boot_id);
	/* Any later Linux boot; this one has not rebooted yet (its reboot
	 * failed, say). */
	return !same_boot_id(rec->boot_id, now->boot_id);
}

/* Refuse, and without the firmware's count remember in which boot. */
static int refuse(struct nmbl_ctx *ctx, const struct chain_record *rec,
		  const struct chain_record *now)
{
	struct chain_record refused = *now;

	nmbl_dbg(ctx, "Boot%04X: the firmware came back without starting it", rec->number);
	if (!(rec->flags & CHAIN_HAS_COUNT && now->flags & CHAIN_HAS_COUNT) &&
	    !(rec->flags & CHAIN_REFUSED)) {
		refused.flags = CHAIN_REFUSED;
		refused.number = rec->number;
		/* Should this fail, later boots refuse too: a false alarm,
		 * never a loop. */
		(void)chain_record_write(ctx, &refused);
	}
	return -ELOOP;
}

NMBL_EXPORT int nmbl_set_boot_next(struct nmbl_ctx *ctx, const char *disk, uint64_t start,
				   const char *file, const char *description,
				   unsigned *ret_number)
{
	_cleanup_free_ void *option = NULL;
	struct nmbl_load_option *want = NULL;
	struct chain_record rec, now;
	const char *name;
	unsigned char next[2];
	unsigned number;
	bool same;
	size_t len;
	int r;

	if (!ctx || !disk || !file || !description || start == 0)
		return -EINVAL;
	name = strrchr(disk, '/');
	name = name ? name + 1 : disk;
	if (!nmbl_valid_block_name(name))
		return -EINVAL;
	r = nmbl_boot_option_for(ctx, name, start, file, description, NULL, 0, &option, &len);
	if (r < 0)
		return r;
	r = nmbl_load_option_parse(option, len, &want);
	if (r < 0)
		return r;
	r = choose_number(ctx, want, description, &number, &same);
	nmbl_load_option_free(want);
	if (r < 0)
		return r;
	chain_now(ctx, &now);
	r = chain_record_read(ctx, &rec);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0 && same && came_back(&rec, &now, number)) {
		if (ret_number)
			*ret_number = number;
		return refuse(ctx, &rec, &now);
	}
	if (!same) {
		char var[16];

		snprintf(var, sizeof(var), "Boot%04X", number);
		r = nmbl_efivar_write(ctx, NMBL_EFI_GLOBAL_GUID, var, option, len);
		if (r < 0)
			return r;
	}
	/* Recorded before BootNext is set: no BootNext without its record. */
	now.number = number;
	r = chain_record_write(ctx, &now);
	if (r < 0)
		return r;
	nmbl_put_le16(next, (uint16_t)number);
	r = nmbl_efivar_write(ctx, NMBL_EFI_GLOBAL_GUID, "BootNext", next, sizeof(next));
	if (r < 0)
		return r;
	if (ret_number)
		*ret_number = number;
	return 0;
}
