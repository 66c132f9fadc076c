/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>

#include "nmbl-private.h"

static void log_stderr(void *data, int priority, const char *file, int line,
		       const char *fn, const char *format, va_list args)
	__attribute__((format(printf, 6, 0)));
static void log_stderr(void *data, int priority, const char *file, int line,
		       const char *fn, const char *format, va_list args)
{
	(void)data;
	(void)priority;
	(void)file;
	(void)line;
	fprintf(stderr, "libnmbl: %s: ", fn);
	vfprintf(stderr, format, args);
	fputc('\n', stderr);
}

void nmbl_log(const struct nmbl_ctx *ctx, int priority, const char *file,
	      int line, const char *fn, const char *format, ...)
{
	va_list args;
	int saved_errno = errno;

	va_start(args, format);
	ctx->log_fn(ctx->log_data, priority, file, line, fn, format, args);
	va_end(args);
	errno = saved_errno;
}

NMBL_EXPORT int nmbl_new(const char *root, struct nmbl_ctx **ret_ctx)
{
	struct nmbl_ctx *ctx;

	if (!ret_ctx)
		return -EINVAL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	/* "/" becomes "" so that paths are simply "<root>/proc/...". */
	ctx->root = strdup(root && strcmp(root, "/") != 0 ? root : "");
	if (!ctx->root) {
		free(ctx);
		return -ENOMEM;
	}
	ctx->refcount = 1;
	ctx->chosen.fd = -1;
	ctx->log_fn = log_stderr;
	ctx->log_priority = LOG_ERR;
	*ret_ctx = ctx;
	return 0;
}

NMBL_EXPORT struct nmbl_ctx *nmbl_ref(struct nmbl_ctx *ctx)
{
	if (ctx)
		ctx->refcount++;
	return ctx;
}

NMBL_EXPORT struct nmbl_ctx *nmbl_unref(struct nmbl_ctx *ctx)
{
	struct nmbl_mount *m;

	if (!ctx || --ctx->refcount > 0)
		return NULL;
	/* Mounts outlive the context on purpose: the loaded kernel's files
	 * may still be in use by the caller; nmbl_umount_all() releases them. */
	while ((m = ctx->mounts)) {
		ctx->mounts = m->next;
		free(m->path);
		free(m);
	}
	nmbl_kernel_file_clear(&ctx->chosen);
	nmbl_held_initrds_clear(ctx);
	free(ctx->handover);
	nmbl_modules_release(ctx);
	nmbl_tpm_release(ctx);
	free(ctx->root);
	free(ctx);
	return NULL;
}

NMBL_EXPORT void nmbl_set_log_fn(struct nmbl_ctx *ctx, nmbl_log_fn fn,
				 void *data)
{
	ctx->log_fn = fn ? fn : log_stderr;
	ctx->log_data = data;
}

NMBL_EXPORT int nmbl_get_log_priority(const struct nmbl_ctx *ctx)
{
	return ctx->log_priority;
}

NMBL_EXPORT void nmbl_set_log_priority(struct nmbl_ctx *ctx, int priority)
{
	ctx->log_priority = priority;
}

char *nmbl_path(const struct nmbl_ctx *ctx, const char *path)
{
	char *p;

	if (asprintf(&p, "%s%s", ctx->root, path) < 0)
		return NULL;
	return p;
}

ssize_t nmbl_read_full(int fd, void *buf, size_t size)
{
	size_t len = 0;

	while (len < size) {
		ssize_t n = read(fd, (char *)buf + len, size - len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	return (ssize_t)len;
}

/*
 * Open PATH to read as a regular file, or -EISDIR, -EINVAL (not a regular
 * file: a FIFO does not block the open).  A path inside one of nmbl's
 * mounts ("<root>/run/nmbl/mnt/PART/...", what GRUB's file names become)
 * is resolved inside that file system, as GRUB resolves it with its own
 * drivers: ".." stops at its root, a symbolic link (absolute too) stays
 * inside it, and neither /proc's magic links nor another mount are
 * followed.  The disk is untrusted; the initramfs is not its to reach.
 */
int nmbl_open_regular(const struct nmbl_ctx *ctx, const char *path)
{
	_cleanup_free_ char *mounts = nmbl_path(ctx, NMBL_MOUNT_DIR "/");
	_cleanup_close_ int fd = -1;
	int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	struct stat st;

	if (!mounts)
		return -ENOMEM;
	if (strncmp(path, mounts, strlen(mounts)) == 0) {
		const char *part = path + strlen(mounts);
		size_t n = strcspn(part, "/");
		struct open_how how = {
			.flags = (uint64_t)flags,
			.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
		};
		_cleanup_free_ char *top = strndup(path, (size_t)(part - path) + n);
		_cleanup_close_ int dfd = -1;

		if (!top)
			return -ENOMEM;
		if (part[n] != '/' || !nmbl_valid_block_name(top + (part - path)))
			return -EINVAL;
		dfd = open(top, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			return -errno;
		fd = (int)syscall(SYS_openat2, dfd, part + n + 1, &how, sizeof(how));
	} else {
		fd = open(path, flags);
	}
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (fcntl(fd, F_SETFL, 0) < 0)
		return -errno;
	return TAKE_FD(fd);
}

int nmbl_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* An in-memory file holding DATA: what kexec_file_load(2) and libblkid
 * take where nmbl has bytes, not a file. */
int nmbl_memfd_of(const char *name, const void *data, size_t len, int *ret_fd)
{
	_cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC);
	int r;

	if (fd < 0)
		return -errno;
	r = nmbl_write_full(fd, data, len);
	if (r < 0)
		return r;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int nmbl_read_small(const struct nmbl_ctx *ctx, const char *path, char *buf,
		    size_t size)
{
	_cleanup_free_ char *p = nmbl_path(ctx, path);
	_cleanup_close_ int fd = -1;
	ssize_t len;

	if (!p)
		return -ENOMEM;
	if (size == 0)
		return -EINVAL;
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	len = nmbl_read_full(fd, buf, size);
	if (len < 0)
		return (int)len;
	if ((size_t)len == size)
		return -EFBIG;
	buf[len] = '\0';
	if (len > 0 && buf[len - 1] == '\n')
		buf[len - 1] = '\0';
	return (int)len;
}

int nmbl_read_fd(int fd, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, size;
	struct stat st;

	if (max > SIZE_MAX / 4)
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (st.st_size < 0 || (uint64_t)st.st_size > max)
		return -EFBIG;
	if (lseek(fd, 0, SEEK_SET) < 0 && errno != ESPIPE)
		return -errno;
	/* Room for the size it says and a byte more, which finds its end
	 * in one allocation; files in /proc say no size, and a file may
	 * grow while it is read: then grow until its end, within MAX. */
	size = (size_t)st.st_size < 4096 ? 4096 : (size_t)st.st_size + 1;
	for (;;) {
		ssize_t n;
		char *b;

		if (size > max + 1)
			size = max + 1;
		b = realloc(buf, size + 1);
		if (!b)
			return -ENOMEM;
		buf = b;
		n = nmbl_read_full(fd, buf + len, size - len);
		if (n < 0)
			return (int)n;
		len += (size_t)n;
		if (len < size)
			break;
		if (len > max)
			return -EFBIG;
		size *= 2;
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	if (ret_len)
		*ret_len = len;
	return 0;
}

int nmbl_read_file(const struct nmbl_ctx *ctx, const char *path, size_t max,
		   char **ret, size_t *ret_len)
{
	_cleanup_free_ char *p = nmbl_path(ctx, path);
	_cleanup_close_ int fd = -1;

	if (!p)
		return -ENOMEM;
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	return nmbl_read_fd(fd, max, ret, ret_len);
}

/*
 * nmbl is process 1 of an initramfs, without swap: memory it asks for
 * beyond the machine's is the OOM killer's, and process 1 killed is a
 * kernel panic, where GRUB would have said that the file is too large.
 * A kernel or an initrd is held more than once (the measured copy, the
 * read, the tree it unpacks to, the kernel's own copy at the load): half
 * of the memory at most, and never more than 1 GiB, many times any
 * distribution's kernel or initrd.
 */
#define NMBL_FILE_CAP ((size_t)1 << 30)

size_t nmbl_file_max(void)
{
	struct sysinfo si;
	uint64_t half;

	if (sysinfo(&si) < 0)
		return NMBL_FILE_CAP;
	half = (uint64_t)si.totalram * (si.mem_unit ? si.mem_unit : 1) / 2;
	return half < NMBL_FILE_CAP ? (size_t)half : NMBL_FILE_CAP;
}
