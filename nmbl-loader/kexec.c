/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <fcntl.h>
#include <linux/kexec.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "nmbl-private.h"

/* Bigger than any initrd a distribution makes; guards against a device
 * node or an endless file named as an initrd. */
#define NMBL_INITRD_MAX (2ULL << 30)

/* GRUB starts each initrd of a list on a 4-byte boundary; the kernel's
 * cpio unpacker skips the zero padding between archives. */
#define NMBL_INITRD_ALIGN 4

static int open_regular(const char *path)
{
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	return fd;
}

static int write_all(int fd, const void *buf, size_t len)
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

static int copy_fd(int from, int to, uint64_t *total)
{
	char buf[64 * 1024];

	for (;;) {
		ssize_t n = read(from, buf, sizeof(buf));
		int r;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return 0;
		*total += (uint64_t)n;
		if (*total > NMBL_INITRD_MAX)
			return -EFBIG;
		r = write_all(to, buf, (size_t)n);
		if (r < 0)
			return r;
	}
}

/* One part of the initrd the kernel gets: bytes in memory, or a file. */
struct part {
	const void *data;
	size_t len;
	const char *path;
};

static int append_part(const struct nmbl_ctx *ctx, int out,
		       const struct part *p, uint64_t *total)
{
	_cleanup_close_ int fd = -1;

	if (p->data) {
		*total += p->len;
		if (*total > NMBL_INITRD_MAX)
			return -EFBIG;
		return write_all(out, p->data, p->len);
	}
	fd = open_regular(p->path);
	if (fd < 0) {
		nmbl_dbg(ctx, "cannot open initrd '%s'", p->path);
		return fd;
	}
	return copy_fd(fd, out, total);
}

static int memfd_of(const char *name, const void *data, size_t len,
		    int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	int r;

	fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = write_all(fd, data, len);
	if (r < 0)
		return r;
	*ret_fd = fd;
	fd = -1;
	return 0;
}

/* One initrd file is passed as it is; anything else becomes one in-memory
 * file, each part starting on GRUB's alignment. */
static int open_initrd(const struct nmbl_ctx *ctx, const struct part *parts,
		       size_t n, int *ret_fd)
{
	static const char zeros[NMBL_INITRD_ALIGN];
	_cleanup_close_ int out = -1;
	uint64_t total = 0;
	int r;

	if (n == 1 && parts[0].path) {
		r = open_regular(parts[0].path);
		if (r < 0)
			return r;
		*ret_fd = r;
		return 0;
	}
	out = memfd_create("nmbl-initrd", MFD_CLOEXEC);
	if (out < 0)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		r = append_part(ctx, out, &parts[i], &total);
		if (r < 0)
			return r;
		if (total % NMBL_INITRD_ALIGN && i + 1 < n) {
			size_t pad = NMBL_INITRD_ALIGN - total % NMBL_INITRD_ALIGN;

			r = write_all(out, zeros, pad);
			if (r < 0)
				return r;
			total += pad;
		}
	}
	nmbl_dbg(ctx, "initrd of %zu parts, %llu bytes", n,
		 (unsigned long long)total);
	*ret_fd = out;
	out = -1;
	return 0;
}

static void image_unrefp(struct nmbl_image **img)
{
	nmbl_image_unref(*img);
}

/* A UKI's .cmdline, without the NUL or newline some builders leave. */
static char *uki_cmdline(const struct nmbl_image *img)
{
	const void *data;
	size_t len;

	if (nmbl_image_section_data(img, ".cmdline", &data, &len) < 0)
		return strdup("");
	len = strnlen(data, len);
	while (len > 0 && (((const char *)data)[len - 1] == '\n' ||
			   ((const char *)data)[len - 1] == ' '))
		len--;
	return strndup(data, len);
}

NMBL_EXPORT int nmbl_load(struct nmbl_ctx *ctx, const char *kernel,
			  const char *const *initrds, size_t n_initrds,
			  const char *cmdline)
{
	__attribute__((cleanup(image_unrefp))) struct nmbl_image *img = NULL;
	_cleanup_close_ int kernel_fd = -1, initrd_fd = -1;
	_cleanup_free_ struct part *parts = NULL;
	_cleanup_free_ char *own_cmdline = NULL;
	unsigned long flags = 0;
	size_t n_parts = 0, max;
	int r;

	if (!ctx || !kernel || (n_initrds && !initrds))
		return -EINVAL;
	if (!cmdline)
		cmdline = "";
	parts = calloc(n_initrds + 2, sizeof(*parts));
	if (!parts)
		return -ENOMEM;

	/* What is not PE at all is left to the kernel to refuse. */
	r = nmbl_image_new_from_file(ctx, kernel, &img);
	if (r < 0 && r != -ENOEXEC)
		return r;

	if (img && nmbl_image_get_type(img) == NMBL_IMAGE_UKI) {
		const void *data;
		size_t len;

		r = nmbl_image_section_data(img, ".linux", &data, &len);
		if (r < 0)
			return r;
		r = memfd_of("nmbl-uki-linux", data, len, &kernel_fd);
		if (r < 0)
			return r;
		/* Microcode must come first in the initrd, as the stub does. */
		if (nmbl_image_section_data(img, ".ucode", &data, &len) == 0)
			parts[n_parts++] = (struct part){ .data = data, .len = len };
		if (nmbl_image_section_data(img, ".initrd", &data, &len) == 0)
			parts[n_parts++] = (struct part){ .data = data, .len = len };
		/* Under Secure Boot the signed .cmdline wins over the entry's
		 * options, as systemd-stub decides. */
		if (nmbl_get_secure_boot(ctx) == 1 || !*cmdline) {
			own_cmdline = uki_cmdline(img);
			if (!own_cmdline)
				return -ENOMEM;
			if (*cmdline)
				nmbl_notice(ctx, "Secure Boot: using the UKI's own command line, not '%s'",
					    cmdline);
			cmdline = own_cmdline;
		}
	} else {
		kernel_fd = open_regular(kernel);
		if (kernel_fd < 0)
			return kernel_fd;
	}

	max = img ? nmbl_image_get_cmdline_max(img) : 0;
	if (max && strlen(cmdline) > max) {
		nmbl_dbg(ctx, "command line of %zu bytes, the kernel takes %zu",
			 strlen(cmdline), max);
		return -E2BIG;
	}

	for (size_t i = 0; i < n_initrds; i++)
		parts[n_parts++] = (struct part){ .path = initrds[i] };
	if (n_parts > 0) {
		r = open_initrd(ctx, parts, n_parts, &initrd_fd);
		if (r < 0)
			return r;
	} else {
		flags |= KEXEC_FILE_NO_INITRAMFS;
	}
	nmbl_info(ctx, "kexec_file_load kernel='%s' initrds=%zu cmdline='%s'",
		  kernel, n_parts, cmdline);
	return nmbl_sys_kexec_file_load(kernel_fd, initrd_fd, cmdline, flags);
}

NMBL_EXPORT int nmbl_unload(struct nmbl_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	return nmbl_sys_kexec_file_load(-1, -1, "", KEXEC_FILE_UNLOAD);
}

bool nmbl_systemd_is_pid1(const struct nmbl_ctx *ctx)
{
	char comm[64];

	return nmbl_read_small(ctx, "/proc/1/comm", comm, sizeof(comm)) > 0 &&
	       strcmp(comm, "systemd") == 0;
}

/*
 * Hand the machine over: through systemd when it runs as PID 1 (it stops
 * services and unmounts), otherwise sync, unmount nmbl's mounts and reboot(2).
 */
static int restart(struct nmbl_ctx *ctx, bool kexec)
{
	int r;

	if (nmbl_systemd_is_pid1(ctx))
		return nmbl_ask_systemd(kexec ? "kexec" : "reboot", NULL);
	sync();
	r = nmbl_umount_all(ctx);
	if (r < 0)
		nmbl_notice(ctx, "could not unmount everything: %s",
			    strerror(-r));
	return nmbl_sys_reboot(kexec);
}

/*
 * systemd as PID 1 acts on the job once systemctl returns: wait to be
 * stopped by it.
 */
int nmbl_ask_systemd(const char *verb, const char *arg)
{
	int r = nmbl_sys_systemctl(verb, arg);

	if (r < 0)
		return r;
	sleep(NMBL_SYSTEMD_TIMEOUT_SEC);
	return -ETIMEDOUT;
}

int nmbl_require_loaded(struct nmbl_ctx *ctx)
{
	int r = nmbl_get_kexec_loaded(ctx);

	if (r < 0)
		return r;
	return r ? 0 : -ENOENT;
}

NMBL_EXPORT int nmbl_exec(struct nmbl_ctx *ctx)
{
	int r;

	if (!ctx)
		return -EINVAL;
	r = nmbl_require_loaded(ctx);
	if (r < 0)
		return r;
	return restart(ctx, true);
}

NMBL_EXPORT int nmbl_reboot(struct nmbl_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	return restart(ctx, false);
}
