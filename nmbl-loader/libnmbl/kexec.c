/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <fcntl.h>
#include <linux/kexec.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "nmbl-private.h"

/* GRUB starts each initrd of a list on a 4-byte boundary; the kernel's
 * cpio unpacker skips the zero padding between archives. */
#define NMBL_INITRD_ALIGN 4

/* FROM appended to TO; *TOTAL, the bytes TO holds, no more than MAX. */
static int copy_fd(int from, int to, uint64_t *total, uint64_t max)
{
	char buf[64 * 1024];

	/* A measured initrd's copy was written to, so is at its end. */
	if (lseek(from, 0, SEEK_SET) < 0)
		return -errno;
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
		if (*total > max)
			return -EFBIG;
		r = nmbl_write_full(to, buf, (size_t)n);
		if (r < 0)
			return r;
	}
}

/* One part of the initrd the kernel gets: bytes in memory, or an open
 * file (-1 for none), which the part owns. */
struct part {
	const void *data;
	size_t len;
	int fd;
};

static int append_part(int out, const struct part *p, uint64_t *total, uint64_t max)
{
	if (p->data) {
		*total += p->len;
		if (*total > max)
			return -EFBIG;
		return nmbl_write_full(out, p->data, p->len);
	}
	return copy_fd(p->fd, out, total, max);
}

/* One initrd file is passed as it is; anything else becomes one in-memory
 * file, each part starting on GRUB's alignment, as large as nmbl may hold
 * in memory at most (a device node or an endless file named as an initrd
 * fills no memory). */
static int open_initrd(const struct nmbl_ctx *ctx, struct part *parts, size_t n, int *ret_fd)
{
	static const char zeros[NMBL_INITRD_ALIGN];
	_cleanup_close_ int out = -1;
	uint64_t total = 0, max = nmbl_file_max();
	int r;

	if (n == 1 && !parts[0].data) {
		*ret_fd = TAKE_FD(parts[0].fd);
		return 0;
	}
	out = memfd_create("nmbl-initrd", MFD_CLOEXEC);
	if (out < 0)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		r = append_part(out, &parts[i], &total, max);
		if (r < 0)
			return r;
		if (total % NMBL_INITRD_ALIGN && i + 1 < n) {
			size_t pad = NMBL_INITRD_ALIGN - total % NMBL_INITRD_ALIGN;

			r = nmbl_write_full(out, zeros, pad);
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

/* What kexec_file_load(2) gets for KERNEL: the kernel, the parts of the
 * initrd that come with it, and the command line that goes with them. */
struct boot_files {
	struct nmbl_image *img; /* NULL: not PE, left to the kernel to refuse */
	int kernel_fd;
	struct part *parts;     /* room for the UKI's two, every initrd, the logs */
	size_t n_parts;
	const char *cmdline;
	char *own_cmdline;
	void *handover;         /* the measurements, for the kexec'd system */
};

static void boot_files_done(struct boot_files *f)
{
	nmbl_image_unref(f->img);
	if (f->kernel_fd >= 0)
		close(f->kernel_fd);
	for (size_t i = 0; i < f->n_parts; i++)
		if (f->parts[i].fd >= 0)
			close(f->parts[i].fd);
	free(f->parts);
	free(f->own_cmdline);
	free(f->handover);
}

/* The kernel file as GRUB measures it: all of it, as read (IMG), or from
 * FD when it is no PE image. */
static int measure_kernel(struct nmbl_ctx *ctx, const struct nmbl_image *img, int fd,
			  const char *name)
{
	const struct nmbl_pe *pe;

	if (!img)
		return nmbl_measure_fd(ctx, NMBL_PCR_GRUB_FILES, fd, name, -1, nmbl_file_max());
	pe = nmbl_image_pe(img);
	return nmbl_measure(ctx, NMBL_PCR_GRUB_FILES, pe->buf, pe->len, name);
}

/* PATH opened and, with a TPM, measured under NAME as it is copied into a
 * sealed in-memory file: what is loaded is what was measured.  Larger than
 * nmbl may hold in memory, it is refused before anything is copied: a
 * sparse file of many GiB would fill the memory, and the OOM killer would
 * kill process 1. */
static int open_measured_initrd(struct nmbl_ctx *ctx, const char *path, const char *name,
				int *ret_fd)
{
	_cleanup_close_ int fd = -1, copy = -1;
	size_t max = nmbl_file_max();
	struct stat st;
	int r;

	fd = nmbl_open_regular(ctx, path);
	if (fd < 0) {
		nmbl_dbg(ctx, "cannot open initrd '%s'", path);
		return fd;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size > max) {
		nmbl_dbg(ctx, "initrd '%s' is larger than %zu bytes", path, max);
		return -EFBIG;
	}
	r = nmbl_tpm_measuring(ctx);
	if (r <= 0) {
		if (r == 0)
			*ret_fd = TAKE_FD(fd);
		return r;
	}
	copy = memfd_create("nmbl-initrd", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (copy < 0)
		return -errno;
	r = nmbl_measure_fd(ctx, NMBL_PCR_GRUB_FILES, fd, name, copy, max);
	if (r < 0)
		return r;
	if (fcntl(copy, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -errno;
	*ret_fd = TAKE_FD(copy);
	return 0;
}

void nmbl_held_initrds_clear(struct nmbl_ctx *ctx)
{
	for (size_t i = 0; i < ctx->n_initrds; i++) {
		free(ctx->initrds[i].path);
		if (ctx->initrds[i].fd >= 0)
			close(ctx->initrds[i].fd);
	}
	free(ctx->initrds);
	ctx->initrds = NULL;
	ctx->n_initrds = 0;
}

/* The initrd PATH as nmbl_measure_initrd() measured it, taken from the
 * context (the first not taken yet); -1 when it holds none. */
static int take_held_initrd(struct nmbl_ctx *ctx, const char *path)
{
	for (size_t i = 0; i < ctx->n_initrds; i++)
		if (ctx->initrds[i].fd >= 0 && strcmp(ctx->initrds[i].path, path) == 0)
			return TAKE_FD(ctx->initrds[i].fd);
	return -1;
}

NMBL_EXPORT int nmbl_measure_kernel(struct nmbl_ctx *ctx, const char *path, const char *name)
{
	_cleanup_(nmbl_image_unrefp) struct nmbl_image *img = NULL;
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *copy = NULL;
	int r;

	if (!ctx || !path || !name)
		return -EINVAL;
	nmbl_held_initrds_clear(ctx);
	nmbl_kernel_file_clear(&ctx->chosen);
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	fd = nmbl_open_regular(ctx, path);
	if (fd < 0)
		return fd;
	r = nmbl_image_new_from_fd(ctx, fd, &img);
	if (r < 0 && r != -ENOEXEC)
		return r;
	r = measure_kernel(ctx, img, fd, name);
	if (r < 0)
		return r;
	ctx->chosen = (struct nmbl_kernel_file){ .path = TAKE_PTR(copy), .fd = TAKE_FD(fd),
						 .img = TAKE_PTR(img), .measured = true };
	return 0;
}

NMBL_EXPORT int nmbl_measure_initrd(struct nmbl_ctx *ctx, const char *path, const char *name)
{
	struct nmbl_held_file *files;
	_cleanup_free_ char *copy = NULL;
	int fd, r;

	if (!ctx || !path || !name)
		return -EINVAL;
	copy = strdup(path);
	files = reallocarray(ctx->initrds, ctx->n_initrds + 1, sizeof(*files));
	if (!copy || !files)
		return -ENOMEM;
	ctx->initrds = files;
	r = open_measured_initrd(ctx, path, name, &fd);
	if (r < 0)
		return r;
	files[ctx->n_initrds++] = (struct nmbl_held_file){ .path = TAKE_PTR(copy), .fd = fd };
	return 0;
}

/* KERNEL opened as kexec_file_load(2) takes it.  A UKI is split as
 * systemd-stub would: its .linux is the kernel, its .ucode and .initrd
 * come first, its .cmdline wins under Secure Boot or for an empty
 * CMDLINE.  -E2BIG when the command line is longer than the kernel takes. */
static int boot_files_open(struct nmbl_ctx *ctx, const char *kernel, size_t n_initrds,
			   const char *cmdline, struct boot_files *f)
{
	_cleanup_close_ int fd = -1;
	size_t max;
	int r;

	*f = (struct boot_files){ .kernel_fd = -1, .cmdline = cmdline ? cmdline : "" };
	f->parts = calloc(n_initrds + 3, sizeof(*f->parts));
	if (!f->parts)
		return -ENOMEM;

	/* One descriptor: the bytes parsed (and measured) here are the file
	 * the kernel reads from it and checks; nmbl_measure_kernel() or
	 * nmbl_choose_boot() may have read it. */
	if (ctx->chosen.path && strcmp(ctx->chosen.path, kernel) == 0) {
		bool measured = ctx->chosen.measured;

		fd = TAKE_FD(ctx->chosen.fd);
		f->img = TAKE_PTR(ctx->chosen.img);
		nmbl_kernel_file_clear(&ctx->chosen);
		r = measured ? 0 : measure_kernel(ctx, f->img, fd, kernel);
	} else {
		nmbl_kernel_file_clear(&ctx->chosen);
		fd = nmbl_open_regular(ctx, kernel);
		if (fd < 0)
			return fd;
		r = nmbl_image_new_from_fd(ctx, fd, &f->img);
		if (r < 0 && r != -ENOEXEC)
			return r;
		r = measure_kernel(ctx, f->img, fd, kernel);
	}
	if (r < 0)
		return r;

	if (f->img && nmbl_image_get_type(f->img) == NMBL_IMAGE_UKI) {
		const void *data;
		size_t len;

		r = nmbl_image_section_data(f->img, ".linux", &data, &len);
		if (r < 0)
			return r;
		r = nmbl_memfd_of("nmbl-uki-linux", data, len, &f->kernel_fd);
		if (r < 0)
			return r;
		/* Microcode must come first in the initrd, as the stub does. */
		if (nmbl_image_section_data(f->img, ".ucode", &data, &len) == 0)
			f->parts[f->n_parts++] = (struct part){ .data = data, .len = len, .fd = -1 };
		if (nmbl_image_section_data(f->img, ".initrd", &data, &len) == 0)
			f->parts[f->n_parts++] = (struct part){ .data = data, .len = len, .fd = -1 };
		/* Under Secure Boot the signed .cmdline wins over the entry's
		 * options, as systemd-stub decides. */
		if (nmbl_get_secure_boot(ctx) == 1 || !*f->cmdline) {
			f->own_cmdline = uki_cmdline(f->img);
			if (!f->own_cmdline)
				return -ENOMEM;
			if (*f->cmdline)
				nmbl_notice(ctx, "Secure Boot: using the UKI's own command line, not '%s'",
					    f->cmdline);
			f->cmdline = f->own_cmdline;
		}
	} else {
		f->kernel_fd = TAKE_FD(fd);
	}

	max = f->img ? nmbl_image_get_cmdline_max(f->img) : 0;
	if (max && strlen(f->cmdline) > max) {
		nmbl_dbg(ctx, "command line of %zu bytes, the kernel takes %zu",
			 strlen(f->cmdline), max);
		return -E2BIG;
	}
	return 0;
}

/* What nmbl_load() gives the kernel: boot_files_open()'s, each initrd
 * as measured (by nmbl_measure_initrd(), or now), and the measurements
 * so far for the system it boots. */
static int load_files_open(struct nmbl_ctx *ctx, const char *kernel,
			   const char *const *initrds, size_t n_initrds, const char *cmdline,
			   struct boot_files *f)
{
	size_t len;
	int r;

	r = boot_files_open(ctx, kernel, n_initrds, cmdline, f);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_initrds; i++) {
		int fd = take_held_initrd(ctx, initrds[i]);

		if (fd < 0) {
			r = open_measured_initrd(ctx, initrds[i], initrds[i], &fd);
			if (r < 0)
				return r;
		}
		f->parts[f->n_parts++] = (struct part){ .fd = fd };
	}
	r = nmbl_tpm_handover_cpio(ctx, NMBL_PHASE_KEXEC, &f->handover, &len);
	if (r < 0)
		return r;
	if (f->handover)
		f->parts[f->n_parts++] = (struct part){ .data = f->handover, .len = len, .fd = -1 };
	return 0;
}

/* Whether the kernel the last nmbl_load() or nmbl_check() gave the kernel
 * is the running one, judged on the very bytes the kernel was given. */
static void note_accepted(struct nmbl_ctx *ctx, const struct boot_files *f)
{
	ctx->kernel_accepted = true;
	ctx->accepted_is_running = f->img && nmbl_image_get_type(f->img) == NMBL_IMAGE_LINUX &&
				   nmbl_image_is_running_kernel(ctx, f->img) == 1;
}

NMBL_EXPORT int nmbl_load(struct nmbl_ctx *ctx, const char *kernel,
			  const char *const *initrds, size_t n_initrds,
			  const char *cmdline)
{
	_cleanup_(boot_files_done) struct boot_files f = { .kernel_fd = -1 };
	_cleanup_close_ int initrd_fd = -1;
	unsigned long flags = 0;
	int r;

	if (!ctx || !kernel || (n_initrds && !initrds))
		return -EINVAL;
	ctx->kernel_accepted = ctx->accepted_is_running = false;
	r = load_files_open(ctx, kernel, initrds, n_initrds, cmdline, &f);
	nmbl_held_initrds_clear(ctx);
	if (r < 0)
		return r;
	if (f.n_parts > 0) {
		r = open_initrd(ctx, f.parts, f.n_parts, &initrd_fd);
		if (r < 0)
			return r;
	} else {
		flags |= KEXEC_FILE_NO_INITRAMFS;
	}
	nmbl_info(ctx, "kexec_file_load kernel='%s' initrds=%zu cmdline='%s'",
		  kernel, f.n_parts, f.cmdline);
	r = nmbl_sys_kexec_file_load(f.kernel_fd, initrd_fd, f.cmdline, flags);
	if (r == 0)
		note_accepted(ctx, &f);
	return r;
}

/*
 * The kernel's checks without the load.  kexec_file_load(2) reads the
 * kernel, checks its format, then its signature against the keys the
 * running kernel trusts for kexec (refusing it under lockdown or
 * KEXEC_SIG_FORCE), and only then copies the command line from memory.
 * nmbl_sys_kexec_file_check() gives it a command line the kernel cannot
 * read (-EFAULT), so the load itself, which for a bzImage copies the
 * kernel into, and hashes, all the memory it will decompress into (tens
 * of MiB), never happens.  -EFAULT is the only answer that comes after the
 * signature check: any other error, -EINVAL included (an empty file, an
 * image of another architecture), is a refusal.  What is no PE image is
 * never asked about (-ENOEXEC).  A kernel that took the line anyway is
 * unloaded.  The descriptor checked is the one the image was read from.
 */
NMBL_EXPORT int nmbl_check(struct nmbl_ctx *ctx, const char *kernel, const char *cmdline)
{
	_cleanup_(boot_files_done) struct boot_files f = { .kernel_fd = -1 };
	int r;

	if (!ctx || !kernel)
		return -EINVAL;
	ctx->kernel_accepted = ctx->accepted_is_running = false;
	r = boot_files_open(ctx, kernel, 0, cmdline, &f);
	/* A direct boot loads no initrd: nmbl_measure_initrd() measured
	 * them, nothing holds them longer, unless the boot goes through
	 * them (nmbl_switch_root() unpacks them, or nmbl_load() takes them
	 * when that cannot be). */
	if (!ctx->handover)
		nmbl_held_initrds_clear(ctx);
	if (r < 0)
		return r;
	if (!f.img)
		return -ENOEXEC;
	nmbl_info(ctx, "kexec_file_load kernel='%s', checked only", kernel);
	r = nmbl_sys_kexec_file_check(f.kernel_fd);
	if (r == 0)
		r = nmbl_sys_kexec_file_load(-1, -1, "", KEXEC_FILE_UNLOAD);
	else if (r == -EFAULT)
		r = 0;
	if (r == 0)
		note_accepted(ctx, &f);
	return r;
}

NMBL_EXPORT int nmbl_unload(struct nmbl_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	ctx->kernel_accepted = ctx->accepted_is_running = false;
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

	/* A menu that was skipped left nmbl-init's watchdog running: the
	 * next system must not be reset by it. */
	r = nmbl_watchdog_disarm();
	if (r < 0)
		nmbl_notice(ctx, "the watchdog keeps running: %s", strerror(-r));
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

/* 0 when a kernel is loaded for kexec, -ENOENT when not. */
static int require_loaded(struct nmbl_ctx *ctx)
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
	r = require_loaded(ctx);
	if (r < 0)
		return r;
	/* The last thing nmbl measures: a failed extension is a failed boot,
	 * and the kernel it would have started goes. */
	r = nmbl_measure_phase(ctx, NMBL_PHASE_KEXEC);
	if (r < 0) {
		(void)nmbl_unload(ctx);
		return r;
	}
	return restart(ctx, true);
}

NMBL_EXPORT int nmbl_reboot(struct nmbl_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	return restart(ctx, false);
}

NMBL_EXPORT int nmbl_get_kexec_loaded(struct nmbl_ctx *ctx)
{
	char buf[8];
	int r;

	if (!ctx)
		return -EINVAL;
	r = nmbl_read_small(ctx, "/sys/kernel/kexec_loaded", buf, sizeof(buf));
	if (r < 0)
		return r;
	if (strcmp(buf, "0") != 0 && strcmp(buf, "1") != 0)
		return -EBADMSG;
	return buf[0] == '1';
}
