/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Direct boot: when the kernel an entry names is the kernel already
 * running, nmbl mounts the entry's root file system and switches root to
 * it instead of booting the same kernel a second time.  This file decides
 * (may the entry boot so, and what root is mounted how); switch-root.c
 * does it.
 *
 * The rule that keeps this honest: the target must not be able to tell.
 * Its userspace sees the entry's command line in /proc/cmdline.  What only
 * the kernel reads, at its own start (mitigations=, iommu=, mem=,
 * console=, selinux=, a built-in module's options, ...), cannot change
 * without a new kernel: when the entry's differ from the running kernel's,
 * nmbl kexecs and says why.  The console log level (quiet, loglevel=,
 * debug) and the panic timeout (panic=) are the exceptions, since they
 * can be set at run time.  And what the entry's own initrd would have set
 * up before mounting root (LVM, LUKS, RAID, a network root, a hibernated
 * system to resume) nmbl's initramfs does not: such entries are kexec'd
 * with their initrd as well.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "nmbl-private.h"

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

enum param_class {
	PARAM_KERNEL,   /* read by the kernel at its start: must match */
	PARAM_USER,     /* read by userspace from /proc/cmdline */
	PARAM_RUNTIME,  /* the console log level, the panic timeout: set at run time */
};

/*
 * What userspace reads and the kernel either ignores or only passes on to
 * init.  Anything not named here counts as the kernel's: a parameter nmbl
 * does not know makes it kexec, never switch into a system that would have
 * started differently.
 */
static enum param_class classify(const char *key)
{
	static const char *const user[] = {
		"BOOT_IMAGE", "initrd", "root", "rootfstype", "rootflags",
		"ro", "rw", "init", "rhgb", "splash", "resume", "resume_offset",
		"noresume", "fastboot", "forcefsck", "net.ifnames",
		"biosdevname", "single", "emergency", "rescue", "auto", "s",
		"S", "-s", "-b", "1", "2", "3", "4", "5", "LANG",
	};
	static const char *const user_prefix[] = {
		"rd.", "rd_", "systemd.", "udev.", "plymouth.", "vconsole.",
		"locale.", "luks.", "fsck.", "nmbl.",
	};

	if (strcmp(key, "quiet") == 0 || strcmp(key, "loglevel") == 0 ||
	    strcmp(key, "debug") == 0 || strcmp(key, "panic") == 0)
		return PARAM_RUNTIME;
	for (size_t i = 0; i < ELEMENTSOF(user); i++)
		if (strcmp(key, user[i]) == 0)
			return PARAM_USER;
	for (size_t i = 0; i < ELEMENTSOF(user_prefix); i++)
		if (has_prefix(key, user_prefix[i]))
			return PARAM_USER;
	return PARAM_KERNEL;
}

static bool has_word(const struct nmbl_cmdline *c, const char *word)
{
	for (size_t i = 0; i < c->n; i++)
		if (classify(c->params[i].key) == PARAM_KERNEL &&
		    strcmp(c->params[i].word, word) == 0)
			return true;
	return false;
}

/* The kernel's parameters of both lines, in order; the first difference
 * as a sentence in *RET_REASON, or NULL when there is none. */
static int compare_kernel_params(const struct nmbl_cmdline *running,
				 const struct nmbl_cmdline *entry, char **ret_reason)
{
	size_t i = 0, j = 0;

	for (;;) {
		while (i < running->n && classify(running->params[i].key) != PARAM_KERNEL)
			i++;
		while (j < entry->n && classify(entry->params[j].key) != PARAM_KERNEL)
			j++;
		if (i == running->n && j == entry->n) {
			*ret_reason = NULL;
			return 0;
		}
		if (i < running->n && j < entry->n &&
		    strcmp(running->params[i].word, entry->params[j].word) == 0) {
			i++, j++;
			continue;
		}
		if (j < entry->n && !has_word(running, entry->params[j].word))
			return asprintf(ret_reason, "its kernel parameter '%s' is not the running kernel's",
					entry->params[j].word) < 0 ? -ENOMEM : 0;
		if (i < running->n && !has_word(entry, running->params[i].word))
			return asprintf(ret_reason, "the running kernel's parameter '%s' is not among its own",
					running->params[i].word) < 0 ? -ENOMEM : 0;
		return (*ret_reason = strdup("its kernel parameters are in another order")) ?
			0 : -ENOMEM;
	}
}

/* /dev/disk/by-* path of a root= value; NULL *RET for a form nmbl does not
 * mount itself. */
static int root_link(const char *spec, bool lower, char **ret)
{
	static const struct {
		const char *prefix, *dir;
	} tags[] = {
		{ "UUID=", "by-uuid" },
		{ "LABEL=", "by-label" },
		{ "PARTUUID=", "by-partuuid" },
		{ "PARTLABEL=", "by-partlabel" },
	};
	_cleanup_free_ char *enc = NULL;

	if (has_prefix(spec, "/dev/")) {
		*ret = strdup(spec);
		return *ret ? 0 : -ENOMEM;
	}
	for (size_t i = 0; i < ELEMENTSOF(tags); i++) {
		if (!has_prefix(spec, tags[i].prefix))
			continue;
		enc = nmbl_udev_encode(spec + strlen(tags[i].prefix));
		if (!enc)
			return -ENXIO;
		if (lower)
			nmbl_hex_lower(enc);
		return asprintf(ret, "/dev/disk/%s/%s", tags[i].dir, enc) < 0 ? -ENOMEM : 0;
	}
	*ret = NULL;
	return 0;
}

/*
 * The block device ROOT names, as "<ctx root>/dev/NAME" in *RET_PATH and
 * NAME in RET_NAME.  -ENXIO when no device has that name (yet), -EINVAL
 * for a form that is no local block device.
 */
int nmbl_root_device(const struct nmbl_ctx *ctx, const char *spec,
		     char **ret_path, char ret_name[NMBL_NAME_MAX])
{
	for (int lower = 0; lower < 2; lower++) {
		_cleanup_free_ char *link = NULL, *full = NULL, *real = NULL;
		_cleanup_free_ char *devdir = NULL;
		const char *name;
		int r;

		r = root_link(spec, lower, &link);
		if (r < 0)
			return r;
		if (!link)
			return -EINVAL;
		full = nmbl_path(ctx, link);
		devdir = nmbl_path(ctx, "/dev/");
		if (!full || !devdir)
			return -ENOMEM;
		real = realpath(full, NULL);
		if (!real)
			continue;
		if (!has_prefix(real, devdir))
			return -ENXIO;
		name = real + strlen(devdir);
		if (!nmbl_valid_block_name(name))
			return -ENXIO;
		strcpy(ret_name, name);
		*ret_path = TAKE_PTR(real);
		return 0;
	}
	return -ENXIO;
}

/* What find_device() asks of each device: 1 when it holds what is looked
 * for, with what it found in *RET. */
static int probe_stacked(const char *dev, struct nmbl_probe *ret)
{
	int r = nmbl_probe_path(dev, 0, ret);

	return r < 0 ? r : ret->stacked != NULL;
}

static int probe_hibernated(const char *dev, struct nmbl_probe *ret)
{
	int r = nmbl_probe_hibernated(dev);

	*ret = (struct nmbl_probe){ .hibernated = r > 0 };
	return r;
}

struct find_device {
	const struct nmbl_ctx *ctx;
	int (*probe)(const char *dev, struct nmbl_probe *ret);
	struct nmbl_probe *ret_probe;
	char *ret_name;
};

static int find_device_on(const char *dev, const char *name, void *userdata)
{
	struct find_device *f = userdata;
	struct nmbl_probe p;
	int r = f->probe(dev, &p);

	if (r < 0) {
		nmbl_dbg(f->ctx, "probing %s: %s", dev, strerror(-r));
		return 0;
	}
	if (r == 0)
		return 0;
	strcpy(f->ret_name, name);
	*f->ret_probe = p;
	return 1;
}

/*
 * The first block device (its name in RET_NAME) on which PROBE finds what
 * it looks for, every disk and partition the kernel has.  A device that
 * cannot be read (a drive without a disc) holds nothing.
 */
static bool find_device(const struct nmbl_ctx *ctx, int (*probe)(const char *, struct nmbl_probe *),
			struct nmbl_probe *ret_probe, char ret_name[NMBL_NAME_MAX])
{
	struct find_device f = { ctx, probe, ret_probe, ret_name };

	return nmbl_each_block_device(ctx, find_device_on, &f) > 0;
}

/* A stacked device on any disk: what might hold a root nmbl cannot find. */
static const char *find_stacked(const struct nmbl_ctx *ctx)
{
	char name[NMBL_NAME_MAX];
	struct nmbl_probe p;

	return find_device(ctx, probe_stacked, &p, name) ? p.stacked : NULL;
}

static bool sys_block_has(const struct nmbl_ctx *ctx, const char *name, const char *sub)
{
	_cleanup_free_ char *p = NULL;
	struct stat st;

	return asprintf(&p, "%s/sys/class/block/%s/%s", ctx->root, name, sub) >= 0 &&
	       stat(p, &st) == 0;
}

int nmbl_root_fstype(const struct nmbl_ctx *ctx, const char *dev, char **ret)
{
	const char *type;
	uint64_t n_devices;
	int r;

	r = nmbl_probe_device(ctx, dev, &type, &n_devices);
	if (r < 0)
		return r;
	if (!type)
		return -ENODEV;
	/* A btrfs of several devices needs them all scanned first, which its
	 * own initrd does (udev's btrfs ready rule); nmbl's does not wait. */
	if (n_devices > 1)
		return -EXDEV;
	*ret = strdup(type);
	return *ret ? 0 : -ENOMEM;
}

/*
 * 1 when the swap RESUME names holds a hibernated system: at the start of
 * the device, or for a swap file at resume_offset= pages into it.  -ENXIO
 * when no device has that name, -EINVAL for a form nmbl cannot look up
 * ("8:3").
 */
static int hibernated(const struct nmbl_ctx *ctx, const char *resume,
		      const struct nmbl_cmdline *entry)
{
	const struct nmbl_param *o = nmbl_cmdline_find(entry, "resume_offset");
	_cleanup_free_ char *path = NULL, *offset = NULL;
	uint64_t page_size = (uint64_t)sysconf(_SC_PAGESIZE), pages = 0;
	char name[NMBL_NAME_MAX], *end;
	struct nmbl_probe p;
	int r;

	r = nmbl_root_device(ctx, resume, &path, name);
	if (r < 0)
		return r;
	if (o) {
		offset = nmbl_param_value(o);
		if (!offset)
			return -ENOMEM;
		/* In pages of the running kernel, which the entry's is. */
		errno = 0;
		pages = strtoull(offset, &end, 10);
		if (errno || end == offset || *end || pages > UINT64_MAX / page_size)
			return -EINVAL;
	}
	r = nmbl_probe_path(path, pages * page_size, &p);
	if (r < 0)
		return r;
	return p.hibernated;
}

static bool enabled(const struct nmbl_cmdline *c, const char *key)
{
	const struct nmbl_param *p = nmbl_cmdline_find(c, key);

	return p && strcmp(p->word + strlen(p->key), "=0") != 0 &&
	       strcmp(p->word + strlen(p->key), "=no") != 0;
}

/*
 * A hibernated system is resumed by the entry's own initrd, wherever it
 * learns of it: resume= (and resume_offset=) on the command line, the
 * initrd's own configuration (Debian's initramfs-tools keeps RESUME=
 * there), or systemd's HibernateLocation EFI variable (systemd 255 and
 * later).  nmbl cannot read an initrd's configuration, so any swap that
 * holds a hibernated system counts, as does the variable.  Booting
 * anything else would mount file systems the image still has in use.
 * noresume on the entry's line tells its initrd not to resume.  A resume=
 * inside a stack (*RET_STACKED) is for the initrd that sets the stack up.
 */
static int check_hibernation(const struct nmbl_ctx *ctx, const struct nmbl_cmdline *entry,
			     char **ret_reason, bool *ret_stacked)
{
	const struct nmbl_param *param = nmbl_cmdline_find(entry, "resume");
	_cleanup_free_ char *resume = NULL, *location = NULL;
	char name[NMBL_NAME_MAX];
	struct nmbl_probe p;
	const char *what;
	size_t len;
	int r;

	*ret_reason = NULL;
	if (nmbl_cmdline_find(entry, "noresume"))
		return 0;
	if (param && !(resume = nmbl_param_value(param)))
		return -ENOMEM;
	if (resume && *resume) {
		r = hibernated(ctx, resume, entry);
		if (r == -ENOMEM)
			return r;
		if (r > 0)
			return asprintf(ret_reason, "resume=%s holds a hibernated system, which its own initrd resumes",
					resume) < 0 ? -ENOMEM : 0;
		*ret_stacked = r == -ENXIO && (what = find_stacked(ctx));
		if (*ret_stacked)
			return asprintf(ret_reason, "resume=%s is not there, and a disk holds %s, which its own initrd may set up",
					resume, what) < 0 ? -ENOMEM : 0;
	}
	if (find_device(ctx, probe_hibernated, &p, name))
		return asprintf(ret_reason, "/dev/%s holds a hibernated system, which its own initrd resumes",
				name) < 0 ? -ENOMEM : 0;
	/* Present, even if unreadable or too large for nmbl, is what counts. */
	r = nmbl_efivar_read(ctx, NMBL_SYSTEMD_GUID, "HibernateLocation", NMBL_SMALL_FILE_MAX,
			     &location, &len);
	if (r == -ENOMEM)
		return r;
	if (r != -ENOENT)
		return (*ret_reason = strdup("systemd's HibernateLocation EFI variable names a hibernated system, which its own initrd resumes")) ?
			0 : -ENOMEM;
	return 0;
}

/*
 * Whether nmbl's initramfs can bring up the root ENTRY names as the entry's
 * own initrd would: *RET_REASON says why not, NULL when it can;
 * *RET_STACKED, whether that initrd would set up a stack of local disks
 * (LVM, LUKS, md RAID, a btrfs of several devices), which it can do as
 * well on the running kernel.
 */
static int check_root(const struct nmbl_ctx *ctx, const struct nmbl_cmdline *entry,
		      char **ret_reason, bool *ret_stacked)
{
	static const struct {
		const char *key, *what;
		bool local;
	} needs[] = {
		{ "rd.lvm.lv", "LVM", true }, { "rd.lvm.vg", "LVM", true },
		{ "rd.luks.uuid", "LUKS", true }, { "rd.luks.name", "LUKS", true },
		{ "luks.uuid", "LUKS", true }, { "luks.name", "LUKS", true },
		{ "rd.md.uuid", "RAID (md)", true }, { "rd.dm.uuid", "device-mapper RAID", true },
		{ "netroot", "a network root", false }, { "rd.iscsi.initiator", "iSCSI", false },
		{ "rd.zfcp", "zFCP", false }, { "rd.dasd", "DASD", false },
	};
	const struct nmbl_param *root = nmbl_cmdline_find(entry, "root");
	_cleanup_free_ char *spec = NULL, *path = NULL;
	char name[NMBL_NAME_MAX];
	struct nmbl_probe p;
	const char *what;
	int r;

	*ret_reason = NULL;
	*ret_stacked = false;
	for (size_t i = 0; i < ELEMENTSOF(needs); i++)
		if (enabled(entry, needs[i].key)) {
			*ret_stacked = needs[i].local;
			return asprintf(ret_reason, "its root needs %s, which its own initrd sets up (%s=)",
					needs[i].what, needs[i].key) < 0 ? -ENOMEM : 0;
		}
	if (!root)
		return (*ret_reason = strdup("it names no root= for nmbl to mount")) ? 0 : -ENOMEM;
	r = check_hibernation(ctx, entry, ret_reason, ret_stacked);
	if (r < 0 || *ret_reason)
		return r;
	spec = nmbl_param_value(root);
	if (!spec)
		return -ENOMEM;
	r = nmbl_root_device(ctx, spec, &path, name);
	if (r == -EINVAL)
		return asprintf(ret_reason, "root=%s is no local block device nmbl mounts itself",
				spec) < 0 ? -ENOMEM : 0;
	if (r == -ENXIO) {
		/* Not there: an initrd may be about to make it, or it is wrong. */
		what = find_stacked(ctx);
		*ret_stacked = what != NULL;
		if (what)
			return asprintf(ret_reason, "root=%s is not there, and a disk holds %s, which its own initrd may set up",
					spec, what) < 0 ? -ENOMEM : 0;
		return 0; /* the mount says it is missing */
	}
	if (r < 0)
		return r;
	if (sys_block_has(ctx, name, "dm") || sys_block_has(ctx, name, "md")) {
		*ret_stacked = true;
		return asprintf(ret_reason, "root=%s is a device-mapper or RAID device its own initrd sets up",
				spec) < 0 ? -ENOMEM : 0;
	}
	/* Unreadable: the mount says why. */
	r = nmbl_probe_path(path, 0, &p);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0;
	*ret_stacked = p.stacked || p.n_devices > 1;
	if (p.stacked)
		return asprintf(ret_reason, "root=%s holds %s, which its own initrd sets up",
				spec, p.stacked) < 0 ? -ENOMEM : 0;
	if (p.n_devices > 1)
		return asprintf(ret_reason, "root=%s is a btrfs of several devices, which its own initrd assembles",
				spec) < 0 ? -ENOMEM : 0;
	return 0;
}

/* The running kernel's command line and CMDLINE, split. */
int nmbl_direct_cmdlines(const struct nmbl_ctx *ctx, const char *cmdline,
			 struct nmbl_cmdline **ret_running, struct nmbl_cmdline **ret_entry)
{
	_cleanup_free_ char *text = NULL;
	struct nmbl_cmdline *running = NULL;
	size_t len;
	int r;

	r = nmbl_read_file(ctx, "/proc/cmdline", NMBL_CMDLINE_MAX, &text, &len);
	if (r < 0)
		return r;
	r = nmbl_cmdline_parse(text, len, &running);
	if (r < 0)
		return r;
	r = nmbl_cmdline_parse(cmdline, strlen(cmdline), ret_entry);
	if (r < 0) {
		nmbl_cmdline_free(running);
		return r;
	}
	*ret_running = running;
	return 0;
}

static int kexec_because(char **ret_reason, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int kexec_because(char **ret_reason, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(ret_reason, fmt, ap);
	va_end(ap);
	return r < 0 ? -ENOMEM : NMBL_BOOT_KEXEC;
}

/*
 * A root its own initrd sets up (*REASON says what): that initrd can set it
 * up as well on the running kernel, so the entry boots directly through
 * it, and *REASON moves to the context, which nmbl_switch_root() reads.
 * Unless there is no initrd to do it, or systemd is process 1 here, whose
 * switch-root nmbl asks for a root (nmbl-init(8) starts the initrd).
 */
static int through_initrd(struct nmbl_ctx *ctx, char **reason)
{
	char *more = NULL;

	if (ctx->n_initrds == 0)
		more = "; it names no initrd";
	else if (nmbl_systemd_is_pid1(ctx))
		more = "; systemd, process 1 here, switches to a root, not to an initrd";
	if (more) {
		char *longer;

		if (asprintf(&longer, "%s%s", *reason, more) < 0)
			return -ENOMEM;
		free(*reason);
		*reason = longer;
		return 0;
	}
	ctx->handover = TAKE_PTR(*reason);
	return 0;
}

NMBL_EXPORT int nmbl_choose_boot(struct nmbl_ctx *ctx, const char *kernel,
				 const char *cmdline, enum nmbl_boot_method *ret_method,
				 char **ret_reason)
{
	_cleanup_(nmbl_image_unrefp) struct nmbl_image *img = NULL;
	_cleanup_cmdline_ struct nmbl_cmdline *running = NULL, *entry = NULL;
	_cleanup_close_ int fd = -1;
	const struct nmbl_param *knob;
	char *reason = NULL;
	int r;

	if (!ctx || !kernel || !cmdline || !ret_method || !ret_reason)
		return -EINVAL;
	free(ctx->handover);
	ctx->handover = NULL;
	r = nmbl_direct_cmdlines(ctx, cmdline, &running, &entry);
	if (r < 0)
		return r;

	knob = nmbl_cmdline_find(running, "nmbl.boot");
	if (knob && strcmp(knob->word, "nmbl.boot=kexec") == 0) {
		r = kexec_because(&reason, "nmbl.boot=kexec asks for kexec always");
		goto done;
	}
	/* nmbl_measure_kernel() read it already: those bytes, not another
	 * read of the file. */
	if (ctx->chosen.path && strcmp(ctx->chosen.path, kernel) == 0) {
		img = nmbl_image_ref(ctx->chosen.img);
		r = img ? 0 : -ENOEXEC;
	} else {
		fd = nmbl_open_regular(ctx, kernel);
		r = fd < 0 ? fd : nmbl_image_new_from_fd(ctx, fd, &img);
	}
	if (r < 0) {
		/* nmbl_load() says what is wrong with it. */
		r = kexec_because(&reason, "it is no kernel image nmbl can compare");
		goto done;
	}
	if (nmbl_image_get_type(img) == NMBL_IMAGE_UKI) {
		r = kexec_because(&reason, "a UKI brings its own initrd and command line");
		goto done;
	}
	r = nmbl_image_is_running_kernel(ctx, img);
	if (r == 0 || r == -ENODATA) {
		const char *v = nmbl_image_get_version(img);

		r = kexec_because(&reason, "it is not the running kernel (it is %.*s)",
				  v ? (int)strcspn(v, " ") : 7, v ? v : "unknown");
		goto done;
	}
	if (r < 0)
		return r;
	r = compare_kernel_params(running, entry, &reason);
	if (r < 0)
		return r;
	if (!reason) {
		bool stacked;

		r = check_root(ctx, entry, &reason, &stacked);
		if (r < 0)
			return r;
		if (reason && stacked) {
			r = through_initrd(ctx, &reason);
			if (r < 0)
				return r;
		}
	}
	r = reason ? NMBL_BOOT_KEXEC : NMBL_BOOT_DIRECT;
done:
	if (r < 0)
		return r;
	/* The file as read, for the check or the load that follows. */
	if (img && fd >= 0) {
		char *path = strdup(kernel);

		if (!path) {
			free(reason);
			return -ENOMEM;
		}
		nmbl_kernel_file_clear(&ctx->chosen);
		ctx->chosen = (struct nmbl_kernel_file){ .path = path, .fd = TAKE_FD(fd),
							 .img = nmbl_image_ref(img) };
	}
	if (ctx->handover)
		nmbl_info(ctx, "%s: direct boot through its own initrd, as %s", kernel, ctx->handover);
	else
		nmbl_info(ctx, "%s: %s%s", kernel, r == NMBL_BOOT_DIRECT ? "direct boot" : "kexec, as ",
			  reason ? reason : "");
	*ret_method = (enum nmbl_boot_method)r;
	*ret_reason = reason;
	return 0;
}

/* mount(8)'s names for the generic flags in rootflags=; the rest is the
 * file system's. */
static int split_flags(const char *options, unsigned long *flags, char **ret_data)
{
	static const struct {
		const char *name;
		unsigned long set, clear;
	} generic[] = {
		{ "ro", MS_RDONLY, 0 }, { "rw", 0, MS_RDONLY },
		{ "nosuid", MS_NOSUID, 0 }, { "suid", 0, MS_NOSUID },
		{ "nodev", MS_NODEV, 0 }, { "dev", 0, MS_NODEV },
		{ "noexec", MS_NOEXEC, 0 }, { "exec", 0, MS_NOEXEC },
		{ "sync", MS_SYNCHRONOUS, 0 }, { "async", 0, MS_SYNCHRONOUS },
		{ "dirsync", MS_DIRSYNC, 0 }, { "noatime", MS_NOATIME, 0 },
		{ "atime", 0, MS_NOATIME }, { "nodiratime", MS_NODIRATIME, 0 },
		{ "diratime", 0, MS_NODIRATIME }, { "relatime", MS_RELATIME, 0 },
		{ "norelatime", 0, MS_RELATIME }, { "strictatime", MS_STRICTATIME, 0 },
		{ "lazytime", MS_LAZYTIME, 0 }, { "nolazytime", 0, MS_LAZYTIME },
		{ "silent", MS_SILENT, 0 }, { "loud", 0, MS_SILENT },
		{ "defaults", 0, 0 },
	};
	_cleanup_free_ char *copy = strdup(options);
	char *data, *d, *opt, *save = NULL;

	data = d = calloc(1, strlen(options) + 1);
	if (!copy || !data) {
		free(data);
		return -ENOMEM;
	}
	for (opt = strtok_r(copy, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < ELEMENTSOF(generic); i++)
			if (strcmp(opt, generic[i].name) == 0)
				break;
		if (i < ELEMENTSOF(generic)) {
			*flags = (*flags | generic[i].set) & ~generic[i].clear;
			continue;
		}
		if (d != data)
			*d++ = ',';
		d = stpcpy(d, opt);
	}
	*ret_data = data;
	return 0;
}

static int value_of(const struct nmbl_cmdline *c, const char *key, char **ret)
{
	const struct nmbl_param *p = nmbl_cmdline_find(c, key);

	*ret = p ? nmbl_param_value(p) : NULL;
	return p && !*ret ? -ENOMEM : 0;
}

/* The console log level the entry's quiet, debug or loglevel= asks for,
 * as the kernel would have set it at its start; 0 for the default. */
int nmbl_cmdline_loglevel(const struct nmbl_cmdline *c)
{
	int level = 0;

	for (size_t i = 0; i < c->n; i++) {
		const char *w = c->params[i].word;

		if (strcmp(w, "quiet") == 0)
			level = 4;
		else if (strcmp(w, "debug") == 0)
			level = 10;
		else if (has_prefix(w, "loglevel=") && w[9] >= '0' && w[9] <= '9')
			level = atoi(w + 9);
	}
	return level;
}

/* The seconds after which a panic reboots, as the kernel takes them from
 * C's last panic= (kstrtoint, base 0); without one, the kernel's built-in
 * CONFIG_PANIC_TIMEOUT, which distributions leave at 0: never. */
long nmbl_cmdline_panic_timeout(const struct nmbl_cmdline *c)
{
	const struct nmbl_param *p = nmbl_cmdline_find(c, "panic");
	_cleanup_free_ char *value = p ? nmbl_param_value(p) : NULL;

	return value ? strtol(value, NULL, 0) : 0;
}

int nmbl_root_mount_parse(const struct nmbl_cmdline *entry, struct nmbl_root_mount *ret)
{
	_cleanup_free_ char *spec = NULL, *fstype = NULL, *rootflags = NULL, *init = NULL;
	unsigned long flags = MS_RDONLY;
	char *data;
	int r;

	if (value_of(entry, "root", &spec) < 0 || value_of(entry, "rootfstype", &fstype) < 0 ||
	    value_of(entry, "rootflags", &rootflags) < 0 || value_of(entry, "init", &init) < 0)
		return -ENOMEM;
	if (!spec)
		return -EINVAL;
	/* The kernel's own rule: read-only unless rw comes last. */
	for (size_t i = 0; i < entry->n; i++) {
		if (strcmp(entry->params[i].word, "rw") == 0)
			flags &= ~(unsigned long)MS_RDONLY;
		else if (strcmp(entry->params[i].word, "ro") == 0)
			flags |= MS_RDONLY;
	}
	r = split_flags(rootflags ? rootflags : "", &flags, &data);
	if (r < 0)
		return r;
	if (fstype && strcmp(fstype, "auto") == 0) {
		free(fstype);
		fstype = NULL;
	}
	*ret = (struct nmbl_root_mount){
		.spec = TAKE_PTR(spec),
		.fstype = TAKE_PTR(fstype),
		.flags = flags,
		.data = data,
		.init = TAKE_PTR(init),
	};
	return 0;
}

void nmbl_root_mount_clear(struct nmbl_root_mount *m)
{
	free(m->spec);
	free(m->fstype);
	free(m->data);
	free(m->init);
	*m = (struct nmbl_root_mount){ 0 };
}
