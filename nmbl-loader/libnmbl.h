/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * libnmbl - boot a Linux kernel from Linux.
 *
 * Every function that can fail returns 0 or a positive count on success and
 * a negative errno on failure; out parameters are named ret_* and are left
 * untouched on failure.  The library never prints: it reports through the
 * context's log function, and the caller turns an error into one sentence
 * with nmbl_strerror().
 */
#ifndef LIBNMBL_H
#define LIBNMBL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nmbl_ctx;

/*
 * A context owns what nmbl did to the machine (mounts made) and where it
 * looks: ROOT prefixes /proc, /sys, /dev and /run so tests can point it at a
 * fixture tree.  NULL means "/".
 */
int nmbl_new(const char *root, struct nmbl_ctx **ret_ctx);
struct nmbl_ctx *nmbl_ref(struct nmbl_ctx *ctx);
struct nmbl_ctx *nmbl_unref(struct nmbl_ctx *ctx);

/* PRIORITY is a syslog priority (LOG_ERR ... LOG_DEBUG). */
typedef void (*nmbl_log_fn)(void *data, int priority, const char *file,
			    int line, const char *fn, const char *format,
			    va_list args);
void nmbl_set_log_fn(struct nmbl_ctx *ctx, nmbl_log_fn fn, void *data);
int nmbl_get_log_priority(const struct nmbl_ctx *ctx);
void nmbl_set_log_priority(struct nmbl_ctx *ctx, int priority);

/*
 * Mount read-only the partition of DISK (a block device node such as
 * "/dev/vda") that starts at sector START (512-byte units, 0 = the whole
 * disk), or reuse nmbl's earlier mount of it.  *ret_mountpoint is
 * malloc'ed; the mount lasts until nmbl_umount_all() or nmbl_exec().
 */
int nmbl_mount_partition(struct nmbl_ctx *ctx, const char *disk,
			 uint64_t start, char **ret_mountpoint);
int nmbl_umount_all(struct nmbl_ctx *ctx);

/*
 * Load KERNEL with N_INITRDS initrds (concatenated in order, each padded
 * to 4 bytes as GRUB does) and CMDLINE through kexec_file_load(2), which
 * checks the kernel's signature when the running kernel requires it.
 */
int nmbl_load(struct nmbl_ctx *ctx, const char *kernel,
	      const char *const *initrds, size_t n_initrds,
	      const char *cmdline);
int nmbl_unload(struct nmbl_ctx *ctx);

/*
 * Boot the loaded kernel: through systemd when it runs as PID 1 (as
 * "systemctl kexec" does), otherwise sync, unmount nmbl's mounts and
 * reboot(LINUX_REBOOT_CMD_KEXEC).  Returns only on failure.
 */
int nmbl_exec(struct nmbl_ctx *ctx);

enum nmbl_lockdown {
	NMBL_LOCKDOWN_NONE,
	NMBL_LOCKDOWN_INTEGRITY,
	NMBL_LOCKDOWN_CONFIDENTIALITY,
};
int nmbl_get_lockdown(struct nmbl_ctx *ctx, enum nmbl_lockdown *ret);
const char *nmbl_lockdown_to_string(enum nmbl_lockdown lockdown);

/* 1 enabled, 0 disabled; -ENOENT when the machine did not boot with EFI. */
int nmbl_get_secure_boot(struct nmbl_ctx *ctx);

/* 1 when a kernel is loaded for kexec, 0 when not. */
int nmbl_get_kexec_loaded(struct nmbl_ctx *ctx);

/*
 * One sentence saying why nmbl_load() (or another nmbl call) failed with
 * ERR (a negative errno), in terms of the kernel being booted.
 */
const char *nmbl_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
