/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl's own A/B fallback, kept by the firmware.  Two slots on the ESP,
 * nmbl-a.efi and nmbl-b.efi, each with its own Boot#### load option.  A
 * new UKI goes into the slot not in use (a temporary file, fsync, rename)
 * and is offered once, through BootNext; BootOrder still starts the good
 * slot.  Only when the system it booted blesses it (nmbl-bless.service,
 * after boot-complete.target) does the new slot come first in BootOrder.
 * A new nmbl that panics, hangs (the watchdog resets it) or is refused by
 * the firmware leaves BootNext spent and BootOrder as it was: the next
 * start is the good slot again, by the firmware alone.
 *
 * With shim, each slot's option starts shim with the slot's file name as
 * its load option (UCS-2, NUL-terminated; shim looks for it in its own
 * directory, where the slots then live), and shim's BOOTX64.CSV names the
 * good slot so that shim's fallback makes the same option again.
 *
 * What the slots hold is written down in one small file on the ESP,
 * \EFI\nmbl\slots (text, "key=value" lines): the slots' directory, their
 * options, which one is good, on trial or failed, and the BootOrder nmbl
 * found, which "remove" puts back.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "nmbl-private.h"

#define STATE_DIR "/EFI/nmbl"
#define STATE_FILE STATE_DIR "/slots"
#define STATE_MAX 4096
#define DEFAULT_DIR "\\EFI\\nmbl"
#define CSV_NAME "BOOTX64.CSV"
#define CSV_SAVED STATE_DIR "/BOOTX64.CSV.orig"
#define BOOT_ORDER_MAX 1024
#define COPY_CHUNK (1024 * 1024)
/* FAT's magic in statfs(2)'s f_type. */
#define MSDOS_MAGIC 0x4d44

static const char *const esp_candidates[] = { "/efi", "/boot/efi", "/boot" };

struct nmbl_slots {
	struct nmbl_ctx *ctx;
	char esp[PATH_MAX];     /* mount point, without the context's root */
	char disk[NMBL_NAME_MAX]; /* "vda" */
	uint64_t start;         /* the ESP's first sector */
	bool exists;            /* read from the ESP (else new) */
	char dir[256];          /* "\EFI\nmbl", as the firmware names it */
	char shim[64];          /* shim's file name in DIR, or "" */
	int good, trial, failed; /* slot index, or -1 */
	int boot[2];            /* Boot#### of each slot, or -1 */
	bool order_saved;       /* saved_order is the BootOrder nmbl found */
	size_t n_saved;
	uint16_t saved[BOOT_ORDER_MAX];
	bool csv_saved;         /* the original BOOTX64.CSV is kept aside */
};

static char slot_name(int i)
{
	return i == 0 ? 'a' : 'b';
}

/* --- the ESP ----------------------------------------------------------- */

/* "\EFI\x" as a path below the ESP's mount point: "/EFI/x". */
static void efi_to_unix(const char *efi, char *out, size_t size)
{
	size_t i;

	for (i = 0; efi[i] && i + 1 < size; i++)
		out[i] = efi[i] == '\\' ? '/' : efi[i];
	out[i] = '\0';
}

/* ROOT + ESP + REL, malloc'ed. */
static char *esp_path(const struct nmbl_ctx *ctx, const struct nmbl_slots *s, const char *rel)
{
	char *p;

	if (asprintf(&p, "%s%s%s", ctx->root, s->esp, rel) < 0)
		return NULL;
	return p;
}

/* The mount point ESP (or the first of the usual ones) from mountinfo, a
 * FAT file system, and its device's major:minor. */
static int find_esp(const struct nmbl_ctx *ctx, const char *want, struct nmbl_slots *s,
		    char *majmin, size_t majmin_size)
{
	_cleanup_free_ char *info = NULL;
	size_t len, n_cand = want ? 1 : ELEMENTSOF(esp_candidates);
	int r;

	/* systemd mounts the ESP on first use (an automount): a look inside
	 * mounts it, before mountinfo is read. */
	for (size_t c = 0; c < n_cand; c++) {
		_cleanup_free_ char *inside = NULL;
		struct stat st;

		if (asprintf(&inside, "%s%s/.", ctx->root, want ? want : esp_candidates[c]) < 0)
			return -ENOMEM;
		(void)stat(inside, &st);
	}
	r = nmbl_read_file(ctx, "/proc/self/mountinfo", NMBL_MOUNTINFO_MAX, &info, &len);
	if (r < 0)
		return r;
	for (size_t c = 0; c < n_cand; c++) {
		const char *cand = want ? want : esp_candidates[c];
		size_t cand_len = strlen(cand);
		char *save = NULL, *copy = strdup(info), *line;
		bool found = false;

		if (!copy)
			return -ENOMEM;
		/* "36 35 254:1 / /efi rw,relatime shared:1 - vfat /dev/vda1 rw,..."
		 * The last mount on a point is the one that shows. */
		for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char id[32], point[PATH_MAX], *dash = strstr(line, " - ");
			char fstype[32];

			if (!dash || sscanf(line, "%*u %*u %31s %*s %4095s", id, point) != 2 ||
			    sscanf(dash + 3, "%31s", fstype) != 1)
				continue;
			/* "--esp /efi/" names /efi too. */
			while (cand_len > 1 && cand[cand_len - 1] == '/')
				cand_len--;
			if (strlen(point) != cand_len || strncmp(point, cand, cand_len) != 0)
				continue;
			found = strcmp(fstype, "vfat") == 0;
			if (found)
				snprintf(majmin, majmin_size, "%s", id);
		}
		free(copy);
		if (found) {
			snprintf(s->esp, sizeof(s->esp), "%.*s", (int)cand_len, cand);
			return 0;
		}
		if (want)
			return -ENOTDIR;
	}
	return -ENOENT;
}

/* The disk and first sector of the partition MAJMIN, from sysfs. */
static int esp_partition(const struct nmbl_ctx *ctx, const char *majmin, struct nmbl_slots *s)
{
	char path[128], target[PATH_MAX], *part, *disk;
	_cleanup_free_ char *link = NULL;
	ssize_t n;
	int r;

	snprintf(path, sizeof(path), "/sys/dev/block/%s/start", majmin);
	r = nmbl_read_u64(ctx, path, &s->start);
	if (r < 0)
		return r == -ENOENT ? -ENOTBLK : r;
	snprintf(path, sizeof(path), "/sys/dev/block/%s", majmin);
	link = nmbl_path(ctx, path);
	if (!link)
		return -ENOMEM;
	/* ".../block/vda/vda1": the partition's parent is its disk. */
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	part = strrchr(target, '/');
	if (!part)
		return -EBADMSG;
	*part = '\0';
	disk = strrchr(target, '/');
	disk = disk ? disk + 1 : target;
	if (!nmbl_valid_block_name(disk) || strlen(disk) >= sizeof(s->disk))
		return -EBADMSG;
	memcpy(s->disk, disk, strlen(disk) + 1);
	return 0;
}

/* --- the state file ------------------------------------------------------ */

static int parse_slot(const char *v)
{
	return strcmp(v, "a") == 0 ? 0 : strcmp(v, "b") == 0 ? 1 : -1;
}

static int parse_number(const char *v)
{
	char *end;
	unsigned long n;

	if (strlen(v) != 4 || strspn(v, "0123456789ABCDEF") != 4)
		return -1;
	n = strtoul(v, &end, 16);
	return (int)n;
}

static void state_init(struct nmbl_slots *s)
{
	s->good = s->trial = s->failed = -1;
	s->boot[0] = s->boot[1] = -1;
	snprintf(s->dir, sizeof(s->dir), "%s", DEFAULT_DIR);
}

/* -ENOENT when nmbl has no slots on this ESP; -EBADMSG when the file is
 * not one nmbl wrote. */
static int state_read(const struct nmbl_ctx *ctx, struct nmbl_slots *s)
{
	_cleanup_free_ char *path = esp_path(ctx, s, STATE_FILE), *buf = NULL;
	char *save = NULL, *line;
	bool version = false;
	size_t len;
	int r;

	state_init(s);
	if (!path)
		return -ENOMEM;
	r = nmbl_read_file(ctx, path + strlen(ctx->root), STATE_MAX, &buf, &len);
	if (r < 0)
		return r == -EFBIG ? -EBADMSG : r;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *v = strchr(line, '=');

		if (line[0] == '#')
			continue;
		if (!v)
			return -EBADMSG;
		*v++ = '\0';
		if (strcmp(line, "version") == 0) {
			version = strcmp(v, "1") == 0;
		} else if (strcmp(line, "dir") == 0) {
			_cleanup_free_ char *norm = NULL;

			/* A directory below \EFI, spelt as the firmware opens
			 * it: no "..", no '/'. */
			if (strncmp(v, "\\EFI\\", 5) != 0 || strlen(v) >= sizeof(s->dir) ||
			    nmbl_efi_path_normalize(v, &norm) < 0 || strcmp(norm, v) != 0)
				return -EBADMSG;
			snprintf(s->dir, sizeof(s->dir), "%s", v);
		} else if (strcmp(line, "shim") == 0) {
			if (strlen(v) >= sizeof(s->shim) || strchr(v, '\\') || strchr(v, '/'))
				return -EBADMSG;
			snprintf(s->shim, sizeof(s->shim), "%s", v);
		} else if (strcmp(line, "good") == 0) {
			s->good = parse_slot(v);
		} else if (strcmp(line, "trial") == 0) {
			s->trial = parse_slot(v);
		} else if (strcmp(line, "failed") == 0) {
			s->failed = parse_slot(v);
		} else if (strcmp(line, "boot-a") == 0) {
			s->boot[0] = parse_number(v);
		} else if (strcmp(line, "boot-b") == 0) {
			s->boot[1] = parse_number(v);
		} else if (strcmp(line, "saved-order") == 0) {
			char *save2 = NULL, *w;

			s->order_saved = true;
			for (w = strtok_r(v, ",", &save2); w; w = strtok_r(NULL, ",", &save2)) {
				int n = parse_number(w);

				if (n < 0 || s->n_saved >= BOOT_ORDER_MAX)
					return -EBADMSG;
				s->saved[s->n_saved++] = (uint16_t)n;
			}
		} else if (strcmp(line, "csv-saved") == 0) {
			s->csv_saved = strcmp(v, "1") == 0;
		}
	}
	if (!version)
		return -EBADMSG;
	s->exists = true;
	return 0;
}

static int fsync_dir_of(const char *path)
{
	_cleanup_free_ char *dir = strdup(path);
	_cleanup_close_ int fd = -1;
	char *slash;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return -errno;
	/* FAT renames over an existing file by rewriting that file's entry
	 * through its inode, which the directory's fsync does not write: the
	 * whole file system, then (seen after a power cut: the old name's
	 * entry still on the disk, its clusters reused by the next file). */
	if (syncfs(fd) < 0)
		return -errno;
	return 0;
}

static int mkdir_p(const char *path)
{
	_cleanup_free_ char *p = strdup(path);

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Replace PATH by what FILL writes into a temporary file beside it:
 * written, flushed to the disk, then renamed over PATH, and the directory
 * flushed.  A crash leaves the old file or the new one, and at worst a
 * stale temporary file that the next write replaces. */
static int replace_file(const struct nmbl_ctx *ctx, const char *path,
			int (*fill)(int fd, const void *data), const void *data)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_free_ char *dir = strdup(path);
	int fd, r;

	if (!dir || asprintf(&tmp, "%s.new", path) < 0)
		return -ENOMEM;
	*strrchr(dir, '/') = '\0';
	r = mkdir_p(dir);
	if (r < 0)
		return r;
	(void)unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	nmbl_dbg(ctx, "writing %s", tmp);
	r = fill(fd, data);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlink(tmp);
		return r;
	}
	r = fsync_dir_of(path);
	if (r < 0)
		return r;
	/* FAT keeps no journal: after a power cut it may hold errors that
	 * Linux finds only now, and then turns the file system read-only
	 * while the calls above still succeed. */
	{
		struct statvfs st;

		if (statvfs(dir, &st) < 0)
			return -errno;
		if (st.f_flag & ST_RDONLY)
			return -EROFS;
	}
	return 0;
}

struct bytes {
	const void *p;
	size_t n;
};

static int fill_bytes(int fd, const void *data)
{
	const struct bytes *b = data;

	return nmbl_write_full(fd, b->p, b->n);
}

static void put_order(FILE *f, const uint16_t *order, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%04X", i ? "," : "", order[i]);
}

static int state_write(const struct nmbl_ctx *ctx, const struct nmbl_slots *s)
{
	_cleanup_free_ char *path = esp_path(ctx, s, STATE_FILE), *text = NULL;
	size_t size = 0;
	FILE *f;

	if (!path)
		return -ENOMEM;
	f = open_memstream(&text, &size);
	if (!f)
		return -ENOMEM;
	fprintf(f, "# nmbl's A/B slots: written by \"nmbl bootcfg\", see nmbl(8)\n"
		   "version=1\ndir=%s\nshim=%s\n", s->dir, s->shim);
	fprintf(f, "good=%s\ntrial=%s\nfailed=%s\n",
		s->good < 0 ? "" : (char[]){ slot_name(s->good), 0 },
		s->trial < 0 ? "" : (char[]){ slot_name(s->trial), 0 },
		s->failed < 0 ? "" : (char[]){ slot_name(s->failed), 0 });
	for (int i = 0; i < 2; i++) {
		fprintf(f, "boot-%c=", slot_name(i));
		if (s->boot[i] >= 0)
			fprintf(f, "%04X", s->boot[i]);
		fputc('\n', f);
	}
	if (s->order_saved) {
		fputs("saved-order=", f);
		put_order(f, s->saved, s->n_saved);
		fputc('\n', f);
	}
	fprintf(f, "csv-saved=%d\n", s->csv_saved);
	if (fclose(f) != 0)
		return -ENOMEM;
	return replace_file(ctx, path, fill_bytes, &(struct bytes){ text, size });
}

/* --- firmware variables ------------------------------------------------------ */

/* BootOrder; -ENOENT when the firmware has none. */
static int boot_order_read(struct nmbl_ctx *ctx, uint16_t *order, size_t *ret_n)
{
	_cleanup_free_ char *raw = NULL;
	size_t len;
	int r;

	r = nmbl_efivar_read(ctx, NMBL_EFI_GLOBAL_GUID, "BootOrder", 2 * BOOT_ORDER_MAX, &raw,
			     &len);
	if (r < 0)
		return r;
	if (len % 2)
		return -EBADMSG;
	for (size_t i = 0; i < len / 2; i++)
		order[i] = nmbl_le16((const unsigned char *)raw + 2 * i);
	*ret_n = len / 2;
	return 0;
}

static int boot_order_write(struct nmbl_ctx *ctx, const uint16_t *order, size_t n)
{
	unsigned char raw[2 * BOOT_ORDER_MAX];

	for (size_t i = 0; i < n; i++)
		nmbl_put_le16(raw + 2 * i, order[i]);
	return nmbl_efivar_write(ctx, NMBL_EFI_GLOBAL_GUID, "BootOrder", raw, 2 * n);
}

/* Drop NUMBER from BootOrder, if it is there. */
static int boot_order_drop(struct nmbl_ctx *ctx, int number)
{
	uint16_t order[BOOT_ORDER_MAX];
	size_t n, m = 0;
	bool found = false;
	int r;

	if (number < 0)
		return 0;
	r = boot_order_read(ctx, order, &n);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		if (order[i] == number)
			found = true;
		else
			order[m++] = order[i];
	}
	return found ? boot_order_write(ctx, order, m) : 0;
}

/* NUMBER first in BootOrder, the rest in their order. */
static int boot_order_first(struct nmbl_ctx *ctx, int number)
{
	uint16_t order[BOOT_ORDER_MAX], out[BOOT_ORDER_MAX];
	size_t n = 0, m = 1;
	int r;

	r = boot_order_read(ctx, order, &n);
	if (r < 0 && r != -ENOENT)
		return r;
	out[0] = (uint16_t)number;
	for (size_t i = 0; i < n && m < BOOT_ORDER_MAX; i++)
		if (order[i] != number)
			out[m++] = order[i];
	return boot_order_write(ctx, out, m);
}

/* BootNext's number, or -1. */
static int boot_next(struct nmbl_ctx *ctx)
{
	_cleanup_free_ char *raw = NULL;
	size_t len;

	if (nmbl_efivar_read(ctx, NMBL_EFI_GLOBAL_GUID, "BootNext", 2, &raw, &len) < 0 ||
	    len != 2)
		return -1;
	return nmbl_le16((const unsigned char *)raw);
}

static int boot_current(struct nmbl_ctx *ctx)
{
	unsigned n;

	return nmbl_get_boot_current(ctx, &n) < 0 ? -1 : (int)n;
}

static int delete_boot_option(struct nmbl_ctx *ctx, int number)
{
	char var[16];
	int r;

	if (number < 0)
		return 0;
	snprintf(var, sizeof(var), "Boot%04X", number);
	r = nmbl_efivar_delete(ctx, NMBL_EFI_GLOBAL_GUID, var);
	return r == -ENOENT ? 0 : r;
}

/* The file slot I's option starts, as the firmware names it: the slot's
 * own, or shim beside it. */
static void slot_efi_file(const struct nmbl_slots *s, int i, char *out, size_t size)
{
	if (s->shim[0])
		snprintf(out, size, "%s\\%s", s->dir, s->shim);
	else
		snprintf(out, size, "%s\\nmbl-%c.efi", s->dir, slot_name(i));
}

static void slot_description(int i, char *out, size_t size)
{
	snprintf(out, size, "nmbl (slot %c)", slot_name(i));
}

/* The option that starts slot I: the slot's file, or shim with the slot's
 * file name as its load option. */
static int slot_option(struct nmbl_ctx *ctx, const struct nmbl_slots *s, int i, void **ret,
		       size_t *ret_len)
{
	char file[512], name[16], desc[32];
	_cleanup_free_ void *name16 = NULL;
	size_t name16_len = 0;
	int r;

	snprintf(name, sizeof(name), "nmbl-%c.efi", slot_name(i));
	slot_description(i, desc, sizeof(desc));
	slot_efi_file(s, i, file, sizeof(file));
	if (s->shim[0]) {
		r = nmbl_utf8_to_utf16(name, &name16, &name16_len);
		if (r < 0)
			return r;
	}
	return nmbl_boot_option_for(ctx, s->disk, s->start, file, desc, name16, name16_len, ret,
				    ret_len);
}

/*
 * The Boot#### the state names for slot I, unless another's option has that
 * number: the state file is on the ESP, which anyone with the disk may
 * write, and must not make install overwrite, bless move first or remove
 * delete another system's option.  nmbl's own has the slot's description
 * and starts the slot's file (or shim beside it), or starts exactly what
 * the slot's option starts under another description: shim's fallback
 * makes the option again from BOOTX64.CSV, with the label written there,
 * when the firmware lost its variables.  When the state's number holds no
 * option, or another's, the lowest option that starts the slot is the
 * slot's; else a number that holds no option is free to take, and
 * otherwise the slot has no option yet (-1): install takes a free number.
 */
static void check_slot_number(struct nmbl_ctx *ctx, struct nmbl_slots *s, int i)
{
	struct nmbl_load_option *opt = NULL, *want = NULL;
	_cleanup_free_ void *raw = NULL;
	char file[512], desc[32];
	const char *have_desc = NULL, *have_file = NULL;
	unsigned found;
	size_t len;
	int r;

	if (s->boot[i] < 0)
		return;
	r = nmbl_read_boot_option(ctx, (unsigned)s->boot[i], &opt);
	if (r == 0) {
		slot_efi_file(s, i, file, sizeof(file));
		slot_description(i, desc, sizeof(desc));
		have_desc = nmbl_load_option_get_description(opt);
		have_file = nmbl_load_option_get_file(opt);
	}
	if (have_desc && strcmp(have_desc, desc) == 0 && have_file &&
	    nmbl_efi_path_equal(have_file, file))
		goto done;
	/* Only now what the slot's option would be: it reads the disk. */
	if (slot_option(ctx, s, i, &raw, &len) < 0 || nmbl_load_option_parse(raw, len, &want) < 0)
		want = NULL;
	if (r == 0 && want && nmbl_load_option_starts_same(opt, want))
		goto done;
	if (r != -ENOENT) {
		nmbl_notice(ctx, "%s names Boot%04X for slot %c, but that option is not "
			    "nmbl's: left alone, the slot gets a number of its own",
			    STATE_FILE, (unsigned)s->boot[i], slot_name(i));
		s->boot[i] = -1;
	}
	if (want && nmbl_find_boot_option(ctx, want, &found) == 0) {
		nmbl_notice(ctx, "slot %c's option is Boot%04X, which starts it (made again, "
			    "as shim's fallback makes it)", slot_name(i), found);
		s->boot[i] = (int)found;
	}
done:
	nmbl_load_option_free(opt);
	nmbl_load_option_free(want);
}

/* Slot I's Boot####: the one the state names (nmbl's own, written anew
 * when it holds other bytes: efivar.c writes nothing that is there), else
 * a free one. */
static int slot_boot_option(struct nmbl_ctx *ctx, struct nmbl_slots *s, int i)
{
	_cleanup_free_ void *option = NULL;
	unsigned number;
	char var[16];
	size_t len;
	int r;

	r = slot_option(ctx, s, i, &option, &len);
	if (r < 0)
		return r;
	if (s->boot[i] >= 0) {
		number = (unsigned)s->boot[i];
	} else {
		r = nmbl_boot_option_free_number(ctx, &number);
		if (r < 0)
			return r;
	}
	snprintf(var, sizeof(var), "Boot%04X", number);
	r = nmbl_efivar_write(ctx, NMBL_EFI_GLOBAL_GUID, var, option, len);
	if (r < 0)
		return r;
	s->boot[i] = (int)number;
	return 0;
}

/* --- files ---------------------------------------------------------------- */

/* The file NAME in the slots' directory, as Linux reaches it; malloc'ed. */
static char *dir_file(const struct nmbl_ctx *ctx, const struct nmbl_slots *s, const char *name)
{
	char dir[256], rel[320];

	efi_to_unix(s->dir, dir, sizeof(dir));
	snprintf(rel, sizeof(rel), "%s/%s", dir, name);
	return esp_path(ctx, s, rel);
}

static char *slot_file(const struct nmbl_ctx *ctx, const struct nmbl_slots *s, int i)
{
	char name[16];

	snprintf(name, sizeof(name), "nmbl-%c.efi", slot_name(i));
	return dir_file(ctx, s, name);
}

static int fill_copy(int fd, const void *data)
{
	int in = *(const int *)data;
	_cleanup_free_ char *buf = malloc(COPY_CHUNK);

	if (!buf)
		return -ENOMEM;
	if (lseek(in, 0, SEEK_SET) < 0)
		return -errno;
	for (;;) {
		ssize_t n = nmbl_read_full(in, buf, COPY_CHUNK);
		int r;

		if (n < 0)
			return (int)n;
		if (n == 0)
			return 0;
		r = nmbl_write_full(fd, buf, (size_t)n);
		if (r < 0)
			return r;
	}
}

/* 1 when files A (open) and B hold the same bytes. */
static int same_content(int a, const char *b)
{
	_cleanup_close_ int fd = open(b, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *x = malloc(COPY_CHUNK), *y = malloc(COPY_CHUNK);
	struct stat sa, sb;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!x || !y)
		return -ENOMEM;
	if (fstat(a, &sa) < 0 || fstat(fd, &sb) < 0)
		return -errno;
	if (sa.st_size != sb.st_size)
		return 0;
	if (lseek(a, 0, SEEK_SET) < 0)
		return -errno;
	for (;;) {
		ssize_t n = nmbl_read_full(a, x, COPY_CHUNK), m = nmbl_read_full(fd, y, COPY_CHUNK);

		if (n < 0 || m < 0)
			return n < 0 ? (int)n : (int)m;
		if (n != m || memcmp(x, y, (size_t)n) != 0)
			return 0;
		if (n == 0)
			return 1;
	}
}

/* shim's fallback reads BOOTX64.CSV (UCS-2 with a byte order mark): one
 * line "shim,label,load options,comment", the good slot's. */
static int write_csv(struct nmbl_ctx *ctx, struct nmbl_slots *s)
{
	char line[256];
	_cleanup_free_ char *path = NULL, *saved = NULL;
	_cleanup_free_ void *text16 = NULL;
	_cleanup_free_ char *bytes = NULL;
	size_t len;
	int r;

	if (!s->shim[0] || s->good < 0)
		return 0;
	path = dir_file(ctx, s, CSV_NAME);
	saved = esp_path(ctx, s, CSV_SAVED);
	if (!path || !saved)
		return -ENOMEM;
	if (!s->csv_saved) {
		_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			r = replace_file(ctx, saved, fill_copy, &fd);
			if (r < 0)
				return r;
			s->csv_saved = true;
			r = state_write(ctx, s);
			if (r < 0)
				return r;
		}
	}
	snprintf(line, sizeof(line), "%s,nmbl,nmbl-%c.efi,nmbl's good slot\n", s->shim,
		 slot_name(s->good));
	r = nmbl_utf8_to_utf16(line, &text16, &len);
	if (r < 0)
		return r;
	/* Byte order mark, then the text without its NUL. */
	bytes = malloc(len + 2);
	if (!bytes)
		return -ENOMEM;
	bytes[0] = (char)0xff, bytes[1] = (char)0xfe;
	memcpy(bytes + 2, text16, len - 2);
	return replace_file(ctx, path, fill_bytes, &(struct bytes){ bytes, len });
}

/* --- the slot tool ------------------------------------------------------- */

NMBL_EXPORT int nmbl_slots_open(struct nmbl_ctx *ctx, const char *esp, struct nmbl_slots **ret)
{
	struct nmbl_slots *s;
	char majmin[32];
	int r;

	if (!ctx || !ret || (esp && esp[0] != '/'))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ctx = nmbl_ref(ctx);
	r = find_esp(ctx, esp, s, majmin, sizeof(majmin));
	if (r == 0)
		r = esp_partition(ctx, majmin, s);
	if (r == 0) {
		r = state_read(ctx, s);
		if (r == -ENOENT)
			r = 0;
	}
	for (int i = 0; r == 0 && i < 2; i++)
		check_slot_number(ctx, s, i);
	if (r < 0) {
		nmbl_slots_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

NMBL_EXPORT struct nmbl_slots *nmbl_slots_free(struct nmbl_slots *s)
{
	if (s) {
		nmbl_unref(s->ctx);
		free(s);
	}
	return NULL;
}

NMBL_EXPORT const char *nmbl_slots_get_esp(const struct nmbl_slots *s)
{
	return s->esp;
}

NMBL_EXPORT const char *nmbl_slots_get_dir(const struct nmbl_slots *s)
{
	return s->dir;
}

static int slot_index(char slot)
{
	return slot == 'a' ? 0 : slot == 'b' ? 1 : -1;
}

NMBL_EXPORT enum nmbl_slot_state nmbl_slots_get_state(const struct nmbl_slots *s, char slot)
{
	_cleanup_free_ char *path = NULL;
	int i = slot_index(slot);

	if (i < 0)
		return NMBL_SLOT_EMPTY;
	if (s->good == i)
		return NMBL_SLOT_GOOD;
	if (s->trial == i)
		return NMBL_SLOT_TRIAL;
	if (s->failed == i)
		return NMBL_SLOT_FAILED;
	path = slot_file(s->ctx, s, i);
	return path && access(path, F_OK) == 0 ? NMBL_SLOT_IDLE : NMBL_SLOT_EMPTY;
}

NMBL_EXPORT const char *nmbl_slot_state_to_string(enum nmbl_slot_state state)
{
	static const char *const names[] = {
		[NMBL_SLOT_EMPTY] = "empty",   [NMBL_SLOT_IDLE] = "idle",
		[NMBL_SLOT_GOOD] = "good",     [NMBL_SLOT_TRIAL] = "trial",
		[NMBL_SLOT_FAILED] = "failed",
	};

	return (unsigned)state < ELEMENTSOF(names) ? names[state] : "unknown";
}

NMBL_EXPORT int nmbl_slots_get_boot_number(const struct nmbl_slots *s, char slot)
{
	int i = slot_index(slot);

	return i < 0 || s->boot[i] < 0 ? -ENOENT : s->boot[i];
}

NMBL_EXPORT char nmbl_slots_get_current(const struct nmbl_slots *s)
{
	int cur = boot_current(s->ctx);

	for (int i = 0; i < 2; i++)
		if (cur >= 0 && s->boot[i] == cur)
			return slot_name(i);
	return '\0';
}

/* Whether the firmware will start the UKI: under Secure Boot, the check
 * the firmware makes (signed by a key of db, not revoked in dbx) made here
 * first.  Fails closed: Secure Boot's state unreadable, or no db while it
 * is on, is a refusal.  With shim, the check shim makes: db, shim's own
 * certificate and the Machine Owner Keys (MokListRT), dbx and MokListXRT;
 * -EINPROGRESS when the signer waits for MokManager's confirmation.  A
 * boot that shim did not start has no MokListRT: only shim could tell,
 * and the UKI is then only checked for being signed. */
static int check_image(struct nmbl_ctx *ctx, const char *uki, int fd, bool shim)
{
	_cleanup_free_ char *signer = NULL;
	struct nmbl_image *img = NULL;
	int r, sb;

	r = nmbl_image_new_from_fd(ctx, fd, &img);
	if (r < 0)
		return r;
	if (nmbl_image_get_truncated(img))
		r = -EBADMSG;
	else if (nmbl_image_get_type(img) != NMBL_IMAGE_UKI)
		r = -ENOEXEC;
	sb = r == 0 ? nmbl_get_secure_boot(ctx) : 0;
	if (sb < 0 && sb != -ENOENT)
		r = sb;
	else if (sb == 1 && shim && !nmbl_image_get_signed(img))
		r = -ENODATA;
	else if (sb == 1 && shim) {
		r = nmbl_image_check_shim(ctx, img, &signer);
		if (r == -ENOENT)
			r = 0;
		else if (r == -EKEYREJECTED)
			r = nmbl_image_mok_pending(ctx, img) ? -EINPROGRESS : -ENOKEY;
	} else if (sb == 1)
		r = nmbl_image_check_firmware(ctx, img, &signer);
	if (r == -ENOENT) /* Secure Boot on, and no db to check against */
		r = nmbl_image_get_signed(img) ? -EKEYREJECTED : -ENODATA;
	if (r < 0)
		nmbl_notice(ctx, "%s: not offered to the firmware: %s", uki, nmbl_strerror(r));
	else if (signer)
		nmbl_dbg(ctx, "%s: signed by '%s', whom %s trusts", uki, signer,
			 shim ? "shim" : "the firmware's db");
	nmbl_image_unref(img);
	return r;
}

NMBL_EXPORT int nmbl_slots_install(struct nmbl_slots *s, const char *uki, const char *shim,
				   char *ret_slot)
{
	struct nmbl_ctx *ctx = s->ctx;
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *target = NULL;
	int r, x, next = boot_next(ctx), cur;

	if (!uki)
		return -EINVAL;
	fd = open(uki, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = check_image(ctx, uki, fd, shim || s->shim[0]);
	if (r < 0)
		return r;
	if (shim) {
		_cleanup_free_ char *norm = NULL;
		char *base;

		/* Slots live beside shim: it looks for its second stage in its
		 * own directory. */
		r = nmbl_efi_path_normalize(shim, &norm);
		if (r < 0)
			return r;
		base = strrchr(norm, '\\');
		if (!base || base == norm || strlen(base + 1) >= sizeof(s->shim) ||
		    (size_t)(base - norm) >= sizeof(s->dir))
			return -EINVAL;
		*base = '\0';
		if (s->exists && (strcasecmp(s->dir, norm) != 0 || strcasecmp(s->shim, base + 1) != 0))
			return -EEXIST;
		snprintf(s->dir, sizeof(s->dir), "%s", norm);
		snprintf(s->shim, sizeof(s->shim), "%s", base + 1);
	}

	/* The same UKI a second time (a package reinstalled): nothing to do
	 * when it is the good slot, or on trial still. */
	for (int i = 0; i < 2; i++) {
		_cleanup_free_ char *path = slot_file(ctx, s, i);

		if (!path)
			return -ENOMEM;
		if ((s->good == i || (s->trial == i && next >= 0 && next == s->boot[i])) &&
		    same_content(fd, path) == 1) {
			if (ret_slot)
				*ret_slot = slot_name(i);
			return 0;
		}
	}

	if (!s->order_saved) {
		r = boot_order_read(ctx, s->saved, &s->n_saved);
		if (r < 0 && r != -ENOENT)
			return r;
		s->order_saved = true;
	}
	/* The idle slot: never the good one, nor the one running now. */
	cur = nmbl_slots_get_current(s);
	if (s->good >= 0)
		x = !s->good;
	else
		x = cur == 'a' ? 1 : 0;

	/* Nothing may start slot X while it is rewritten. */
	if (s->boot[x] >= 0 && next == s->boot[x]) {
		r = nmbl_efivar_delete(ctx, NMBL_EFI_GLOBAL_GUID, "BootNext");
		if (r < 0 && r != -ENOENT)
			return r;
		next = -1;
	}
	r = boot_order_drop(ctx, s->boot[x]);
	if (r < 0)
		return r;
	if (s->trial == x)
		s->trial = -1;
	if (s->failed == x)
		s->failed = -1;
	r = state_write(ctx, s);
	if (r < 0)
		return r;

	target = slot_file(ctx, s, x);
	if (!target)
		return -ENOMEM;
	r = replace_file(ctx, target, fill_copy, &fd);
	if (r < 0)
		return r;
	r = slot_boot_option(ctx, s, x);
	if (r < 0)
		return r;
	s->trial = x;
	r = state_write(ctx, s);
	if (r < 0)
		return r;
	s->exists = true;
	{
		unsigned char raw[2];

		nmbl_put_le16(raw, (uint16_t)s->boot[x]);
		r = nmbl_efivar_write(ctx, NMBL_EFI_GLOBAL_GUID, "BootNext", raw, sizeof(raw));
		if (r < 0)
			return r;
	}
	if (ret_slot)
		*ret_slot = slot_name(x);
	return 0;
}

NMBL_EXPORT int nmbl_slots_bless(struct nmbl_slots *s, enum nmbl_bless_result *ret)
{
	struct nmbl_ctx *ctx = s->ctx;
	int r, t = s->trial, cur = boot_current(ctx), next = boot_next(ctx);

	*ret = NMBL_BLESS_NOTHING;
	if (t < 0)
		return 0;
	if (next >= 0 && next == s->boot[t]) {
		/* Not tried yet: BootNext is spent when the firmware tries it. */
		*ret = NMBL_BLESS_PENDING;
		return 0;
	}
	if (cur >= 0 && cur == s->boot[t]) {
		r = boot_order_first(ctx, s->boot[t]);
		if (r < 0)
			return r;
		s->good = t;
		s->trial = -1;
		s->failed = -1;
		*ret = NMBL_BLESS_GOOD;
	} else {
		s->failed = t;
		s->trial = -1;
		*ret = NMBL_BLESS_FAILED;
	}
	r = state_write(ctx, s);
	if (r < 0)
		return r;
	return *ret == NMBL_BLESS_GOOD ? write_csv(ctx, s) : 0;
}

NMBL_EXPORT int nmbl_slots_remove(struct nmbl_slots *s)
{
	struct nmbl_ctx *ctx = s->ctx;
	_cleanup_free_ char *state = esp_path(ctx, s, STATE_FILE);
	_cleanup_free_ char *saved = esp_path(ctx, s, CSV_SAVED);
	int r, next = boot_next(ctx);

	if (!state || !saved)
		return -ENOMEM;
	if (!s->exists)
		return 0;
	/* First what the firmware would start, then the files. */
	if (next >= 0 && (next == s->boot[0] || next == s->boot[1])) {
		r = nmbl_efivar_delete(ctx, NMBL_EFI_GLOBAL_GUID, "BootNext");
		if (r < 0 && r != -ENOENT)
			return r;
	}
	if (s->order_saved) {
		uint16_t order[BOOT_ORDER_MAX];
		size_t m = 0;

		for (size_t i = 0; i < s->n_saved; i++)
			if (s->saved[i] != s->boot[0] && s->saved[i] != s->boot[1])
				order[m++] = s->saved[i];
		r = boot_order_write(ctx, order, m);
	} else {
		r = boot_order_drop(ctx, s->boot[0]);
		if (r == 0)
			r = boot_order_drop(ctx, s->boot[1]);
	}
	if (r < 0)
		return r;
	for (int i = 0; i < 2; i++) {
		_cleanup_free_ char *path = slot_file(ctx, s, i);

		r = delete_boot_option(ctx, s->boot[i]);
		if (r < 0)
			return r;
		if (!path)
			return -ENOMEM;
		if (unlink(path) < 0 && errno != ENOENT)
			return -errno;
	}
	if (s->csv_saved) {
		_cleanup_free_ char *csv = dir_file(ctx, s, CSV_NAME);
		_cleanup_close_ int fd = open(saved, O_RDONLY | O_CLOEXEC);

		if (!csv)
			return -ENOMEM;
		if (fd < 0)
			return -errno;
		r = replace_file(ctx, csv, fill_copy, &fd);
		if (r < 0)
			return r;
		(void)unlink(saved);
	}
	if (unlink(state) < 0 && errno != ENOENT)
		return -errno;
	state_init(s);
	s->exists = false;
	s->order_saved = false;
	s->n_saved = 0;
	s->shim[0] = '\0';
	s->csv_saved = false;
	return fsync_dir_of(state);
}
