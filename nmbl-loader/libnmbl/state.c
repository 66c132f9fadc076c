/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "nmbl-private.h"

/*
 * securityfs lists every level and brackets the active one:
 * "none [integrity] confidentiality".
 */
NMBL_EXPORT int nmbl_get_lockdown(struct nmbl_ctx *ctx,
				  enum nmbl_lockdown *ret)
{
	char buf[128];
	const char *open, *close;
	size_t len;
	int r;

	if (!ctx || !ret)
		return -EINVAL;
	r = nmbl_read_small(ctx, "/sys/kernel/security/lockdown", buf,
			    sizeof(buf));
	if (r < 0)
		return r;
	open = strchr(buf, '[');
	close = open ? strchr(open, ']') : NULL;
	if (!close)
		return -EBADMSG;
	open++;
	len = (size_t)(close - open);
	if (len == 4 && strncmp(open, "none", len) == 0)
		*ret = NMBL_LOCKDOWN_NONE;
	else if (len == 9 && strncmp(open, "integrity", len) == 0)
		*ret = NMBL_LOCKDOWN_INTEGRITY;
	else if (len == 15 && strncmp(open, "confidentiality", len) == 0)
		*ret = NMBL_LOCKDOWN_CONFIDENTIALITY;
	else
		return -EBADMSG;
	return 0;
}

NMBL_EXPORT const char *nmbl_lockdown_to_string(enum nmbl_lockdown lockdown)
{
	switch (lockdown) {
	case NMBL_LOCKDOWN_NONE:
		return "none";
	case NMBL_LOCKDOWN_INTEGRITY:
		return "integrity";
	case NMBL_LOCKDOWN_CONFIDENTIALITY:
		return "confidentiality";
	}
	return NULL;
}

/* A one-byte boolean EFI global variable.  efivarfs gives a 4-byte
 * attribute word, then the data. */
static int efi_global_bool(struct nmbl_ctx *ctx, const char *name)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -1;
	unsigned char buf[8];
	ssize_t n;

	if (!ctx)
		return -EINVAL;
	if (asprintf(&path, "%s" NMBL_EFIVARS "%s-" NMBL_EFI_GLOBAL_GUID, ctx->root, name) < 0)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = nmbl_read_full(fd, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (n != 5 || buf[4] > 1)
		return -EBADMSG;
	return buf[4];
}

NMBL_EXPORT int nmbl_get_secure_boot(struct nmbl_ctx *ctx)
{
	return efi_global_bool(ctx, "SecureBoot");
}

NMBL_EXPORT int nmbl_get_setup_mode(struct nmbl_ctx *ctx)
{
	return efi_global_bool(ctx, "SetupMode");
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

NMBL_EXPORT const char *nmbl_strerror(int err)
{
	switch (-err) {
	case ENOENT:
		return "the file does not exist";
	case ENODATA:
		return "the kernel is not signed, and Secure Boot (lockdown) "
		       "boots only signed kernels";
	case ENOKEY:
		return "the kernel is signed by a key this machine does not "
		       "trust (not in the firmware's db, in MOK or built into "
		       "the running kernel)";
	case EKEYREJECTED:
		return "the kernel's signature does not match its contents: "
		       "the file was changed or damaged after it was signed";
	case EBADMSG:
		return "the kernel's signature is malformed";
	case ELIBBAD:
		/* What the kernel's PE parser says of a file cut short. */
		return "the kernel image is malformed or truncated";
	case ENOPKG:
		return "the kernel's signature uses an algorithm the running "
		       "kernel does not support";
	case ENOEXEC:
		return "the file is not a Linux kernel that can be booted "
		       "(wrong format, or truncated)";
	case EPERM:
		return "the running kernel's lockdown forbids booting this "
		       "kernel without a valid signature";
	case ENOSYS:
		return "the running kernel has no kexec_file_load (it was "
		       "built without CONFIG_KEXEC_FILE)";
	case EISDIR:
		return "the path is a directory, not a file";
	case EFBIG:
		return "the file is too large";
	case E2BIG:
		return "the command line is longer than the kernel accepts";
	case ENXIO:
		return "no such disk or partition is known to Linux";
	case ENOMEDIUM:
		return "the file system holds no init to start (/sbin/init, "
		       "or the program init= names)";
	case ENODEV:
		return "Linux cannot mount that file system";
	case EIO:
		return "the disk could not be read (a bad block, or a disk that "
		       "went away)";
	case EBUSY:
		return "the device is still mounted, and a second mount would "
		       "share that mount's options";
	case EXDEV:
		return "the path leads out of the partition it names";
	default:
		return strerror(-err);
	}
}

/* EFI_OS_INDICATIONS_BOOT_TO_FW_UI, in OsIndicationsSupported and
 * OsIndications (UEFI 2.10, 8.5.4). */
#define OS_INDICATIONS_BOOT_TO_FW_UI UINT64_C(0x1)

/* A 64-bit EFI global variable; -ENOENT when it is not set. */
static int efi_global_u64(struct nmbl_ctx *ctx, const char *name, uint64_t *ret)
{
	_cleanup_free_ char *raw = NULL;
	size_t len;
	int r;

	r = nmbl_efivar_read(ctx, NMBL_EFI_GLOBAL_GUID, name, 8, &raw, &len);
	if (r < 0)
		return r;
	if (len != 8)
		return -EBADMSG;
	*ret = nmbl_le64((const unsigned char *)raw);
	return 0;
}

NMBL_EXPORT int nmbl_get_firmware_setup_supported(struct nmbl_ctx *ctx)
{
	uint64_t supported;
	int r;

	if (!ctx)
		return -EINVAL;
	r = efi_global_u64(ctx, "OsIndicationsSupported", &supported);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	return (supported & OS_INDICATIONS_BOOT_TO_FW_UI) != 0;
}

NMBL_EXPORT int nmbl_set_boot_to_firmware_setup(struct nmbl_ctx *ctx)
{
	unsigned char le[8];
	uint64_t indications = 0;
	int r;

	r = nmbl_get_firmware_setup_supported(ctx);
	if (r <= 0)
		return r < 0 ? r : -EOPNOTSUPP;
	r = efi_global_u64(ctx, "OsIndications", &indications);
	if (r < 0 && r != -ENOENT)
		return r;
	indications |= OS_INDICATIONS_BOOT_TO_FW_UI;
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(indications >> (8 * i));
	return nmbl_efivar_write(ctx, NMBL_EFI_GLOBAL_GUID, "OsIndications", le, sizeof(le));
}
