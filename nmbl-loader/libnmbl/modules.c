/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Kernel modules: libkmod resolves an alias ("fs-ext4", a device's
 * modalias) to modules, their dependencies and soft dependencies, and
 * honours blacklists; the modules themselves are inserted through nmbl's
 * seam, so tests see what would be loaded without loading it.  A module
 * may be compressed (NAME.ko.zst, .ko.xz, .ko.gz, as distributions and
 * nmbl's own image ship them): it is decompressed here, into a memory
 * file, as not every kernel can do it itself (CONFIG_MODULE_DECOMPRESS),
 * and finit_module() reads it from there as from any file.
 */
#include <dirent.h>
#include <fcntl.h>
#include <libkmod.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "nmbl-private.h"

/* Deeper than any real dependency chain; a guard against a cycle in a
 * broken modules.dep. */
#define NMBL_MODULE_DEPTH_MAX 32

/* Decompressed, the largest module of a distribution kernel is a few
 * MiB (amdgpu, some 20). */
#define NMBL_MODULE_MAX (64u << 20)

/* The buses whose devices nmbl needs: disks and keyboards. */
static const char *const coldplug_buses[] = {
	"pci", "virtio", "usb", "scsi", "hid", "platform", "acpi", "mmc",
};

static void log_from_kmod(void *data, int priority, const char *file,
			  int line, const char *fn, const char *format,
			  va_list args)
{
	const struct nmbl_ctx *ctx = data;

	if (ctx->log_priority >= priority)
		ctx->log_fn(ctx->log_data, priority, file, line, fn, format, args);
}

/* The context's libkmod context, opened on first use: a second lookup
 * finds the indexes loaded. */
static int open_kmod(struct nmbl_ctx *ctx, struct kmod_ctx **ret)
{
	_cleanup_free_ char *dir = NULL, *c1 = NULL, *c2 = NULL, *c3 = NULL, *c4 = NULL;
	struct utsname u;
	struct kmod_ctx *k;

	if (ctx->kmod) {
		*ret = ctx->kmod;
		return 0;
	}
	if (uname(&u) < 0)
		return -errno;
	if (asprintf(&dir, "%s/lib/modules/%s", ctx->root, u.release) < 0 ||
	    asprintf(&c1, "%s/etc/modprobe.d", ctx->root) < 0 ||
	    asprintf(&c2, "%s/run/modprobe.d", ctx->root) < 0 ||
	    asprintf(&c3, "%s/usr/lib/modprobe.d", ctx->root) < 0 ||
	    asprintf(&c4, "%s/lib/modprobe.d", ctx->root) < 0)
		return -ENOMEM;
	{
		const char *config[] = { c1, c2, c3, c4, NULL };

		k = kmod_new(dir, config);
	}
	if (!k)
		return -ENOMEM;
	kmod_set_log_fn(k, log_from_kmod, ctx);
	kmod_set_log_priority(k, ctx->log_priority);
	/* Without them libkmod opens each index on every lookup. */
	(void)kmod_load_resources(k);
	*ret = ctx->kmod = k;
	return 0;
}

void nmbl_modules_release(struct nmbl_ctx *ctx)
{
	ctx->kmod = kmod_unref(ctx->kmod);
}

static int insert(struct nmbl_ctx *ctx, struct kmod_module *mod, int depth);

/* Loaded (or being loaded, or built in) per the context's /sys/module:
 * libkmod would look at the real /sys, whatever the root. */
static bool module_present(const struct nmbl_ctx *ctx, const char *name)
{
	char path[300], state[32];
	_cleanup_free_ char *dir = NULL;
	struct stat st;

	snprintf(path, sizeof(path), "/sys/module/%s/initstate", name);
	if (nmbl_read_small(ctx, path, state, sizeof(state)) > 0)
		return strcmp(state, "live") == 0 || strcmp(state, "coming") == 0;
	/* Built-in modules have a directory (for their parameters) only. */
	snprintf(path, sizeof(path), "/sys/module/%s", name);
	dir = nmbl_path(ctx, path);
	return dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Every module of LIST, in order: a module's hard dependencies, all needed. */
static int insert_list(struct nmbl_ctx *ctx, struct kmod_list *list, int depth)
{
	struct kmod_list *l;
	int r = 0;

	kmod_list_foreach(l, list) {
		struct kmod_module *m = kmod_module_get_module(l);

		r = insert(ctx, m, depth);
		kmod_module_unref(m);
		if (r < 0)
			break;
	}
	return r;
}

/* Each module an alias or a soft dependency names, in order, as modprobe
 * inserts them: one that cannot load does not stop the next (ext4's soft
 * dependency crypto-crc32c names crc32c-intel, which fails with ENODEV
 * without SSE4.2, then crc32c_generic).  0 for an empty list or when one
 * loaded or was there; else the first failure. */
static int insert_each(struct nmbl_ctx *ctx, struct kmod_list *list, int depth)
{
	struct kmod_list *l;
	int first = 0;
	bool loaded = false;

	kmod_list_foreach(l, list) {
		struct kmod_module *m = kmod_module_get_module(l);
		int r = insert(ctx, m, depth);

		if (r < 0) {
			nmbl_info(ctx, "module %s: %s", kmod_module_get_name(m), nmbl_strerror(r));
			if (!first)
				first = r;
		} else {
			loaded = true;
		}
		kmod_module_unref(m);
	}
	return loaded ? 0 : first;
}

/* The file at PATH (libkmod's, the root's already in it), no larger than
 * a module may be. */
static int read_whole(const char *path, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADMSG;
	if ((unsigned long long)st.st_size > NMBL_MODULE_MAX)
		return -EFBIG;
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf)
		return -ENOMEM;
	n = nmbl_read_full(fd, buf, (size_t)st.st_size);
	if (n < 0)
		return (int)n;
	*ret_len = (size_t)n;
	*ret = TAKE_PTR(buf);
	return 0;
}

/* A descriptor to insert the module at PATH from: the file, or, for a
 * compressed one, a memory file of its decompressed bytes. */
static int open_module(struct nmbl_ctx *ctx, const char *path, int *ret_fd)
{
	static const char *const suffixes[] = { ".ko.zst", ".ko.xz", ".ko.gz" };
	_cleanup_free_ char *packed = NULL, *name = NULL;
	_cleanup_free_ void *module = NULL;
	const char *base = strrchr(path, '/');
	size_t packed_len = 0, len = 0, name_len;
	int fd, r;

	base = base ? base + 1 : path;
	name_len = strlen(base);
	for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
		size_t n = strlen(suffixes[i]);

		if (name_len > n && strcmp(base + name_len - n, suffixes[i]) == 0) {
			name = strndup(base, name_len - n + strlen(".ko"));
			if (!name)
				return -ENOMEM;
			break;
		}
	}
	if (!name) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		*ret_fd = fd;
		return 0;
	}
	r = read_whole(path, &packed, &packed_len);
	if (r < 0)
		return r;
	r = nmbl_decompress(packed, packed_len, NMBL_MODULE_MAX, &module, &len);
	if (r < 0) {
		nmbl_info(ctx, "module %s: cannot decompress %s: %s", name, path, nmbl_strerror(r));
		return r;
	}
	return nmbl_memfd_of(name, module, len, ret_fd);
}

/* Soft dependencies before, hard dependencies, the module, soft after:
 * the order modprobe uses. */
static int insert(struct nmbl_ctx *ctx, struct kmod_module *mod, int depth)
{
	struct kmod_list *deps, *pre = NULL, *post = NULL;
	_cleanup_close_ int fd = -1;
	const char *path;
	int r;

	if (depth > NMBL_MODULE_DEPTH_MAX)
		return -ELOOP;
	if (module_present(ctx, kmod_module_get_name(mod)))
		return 0;
	/* libkmod found it, but not in modules.dep: it is built in. */
	path = kmod_module_get_path(mod);
	if (!path)
		return 0;

	if (kmod_module_get_softdeps(mod, &pre, &post) == 0) {
		/* A missing soft dependency is no failure, as for modprobe. */
		(void)insert_each(ctx, pre, depth + 1);
	}
	deps = kmod_module_get_dependencies(mod);
	r = insert_list(ctx, deps, depth + 1);
	kmod_module_unref_list(deps);
	if (r < 0)
		goto out;

	r = open_module(ctx, path, &fd);
	if (r < 0)
		goto out;
	r = nmbl_sys_finit_module(fd, "");
	if (r == -EEXIST)
		r = 0;
	if (r == 0)
		nmbl_info(ctx, "loaded module %s", kmod_module_get_name(mod));
	(void)insert_each(ctx, post, depth + 1);
out:
	kmod_module_unref_list(pre);
	kmod_module_unref_list(post);
	return r;
}

static int load_alias(struct nmbl_ctx *ctx, struct kmod_ctx *k,
		      const char *alias)
{
	struct kmod_list *list = NULL, *filtered = NULL;
	int r;

	r = kmod_module_new_from_lookup(k, alias, &list);
	if (r < 0)
		return r;
	if (!list)
		return -ENOENT;
	r = kmod_module_apply_filter(k, KMOD_FILTER_BLACKLIST, list, &filtered);
	kmod_module_unref_list(list);
	if (r < 0)
		return r;
	r = insert_each(ctx, filtered, 0);
	kmod_module_unref_list(filtered);
	return r;
}

NMBL_EXPORT int nmbl_load_module(struct nmbl_ctx *ctx, const char *alias)
{
	struct kmod_ctx *k;
	int r;

	if (!ctx || !alias || !*alias)
		return -EINVAL;
	r = open_kmod(ctx, &k);
	if (r < 0)
		return r;
	return load_alias(ctx, k, alias);
}

/* The character sets FAT is mounted with unless told otherwise: the
 * kernel's FAT_DEFAULT_CODEPAGE (437) and FAT_DEFAULT_IOCHARSET (ascii, or
 * utf8 in some builds).  The kernel asks modprobe for them at the mount,
 * and nmbl's initramfs has no modprobe: without them the mount fails. */
static const char *const fat_charsets[] = { "nls_cp437", "nls_ascii", "nls_utf8" };

int nmbl_load_fs_module(struct nmbl_ctx *ctx, const char *fstype)
{
	_cleanup_free_ char *alias = NULL;
	int r;

	if (asprintf(&alias, "fs-%s", fstype) < 0)
		return -ENOMEM;
	r = nmbl_load_module(ctx, alias);
	/* Built in or absent, the mount says which it needed. */
	if (strcmp(fstype, "vfat") == 0)
		for (size_t i = 0; i < ELEMENTSOF(fat_charsets); i++)
			(void)nmbl_load_module(ctx, fat_charsets[i]);
	return r == -ENOENT ? 0 : r;
}

NMBL_EXPORT int nmbl_coldplug(struct nmbl_ctx *ctx)
{
	struct kmod_ctx *k;
	int r, loaded = 0;

	if (!ctx)
		return -EINVAL;
	r = open_kmod(ctx, &k);
	if (r < 0)
		return r;
	for (size_t b = 0; b < ELEMENTSOF(coldplug_buses); b++) {
		_cleanup_free_ char *dir = NULL;
		struct dirent *de;
		DIR *d;

		if (asprintf(&dir, "%s/sys/bus/%s/devices", ctx->root, coldplug_buses[b]) < 0)
			return -ENOMEM;
		d = opendir(dir);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			char path[512], alias[NMBL_SMALL_FILE_MAX];

			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/sys/bus/%s/devices/%s/modalias",
				 coldplug_buses[b], de->d_name);
			if (nmbl_read_small(ctx, path, alias, sizeof(alias)) <= 0)
				continue;
			/* No module for a device is the common case. */
			if (load_alias(ctx, k, alias) == 0)
				loaded++;
		}
		closedir(d);
	}
	return loaded;
}
