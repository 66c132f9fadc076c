/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The firmware's state, from its EFI global variables: Secure Boot, setup
 * mode, and whether it shows its setup at the next boot (OsIndications).
 */
#include "nmbl-private.h"

/* A one-byte boolean EFI global variable.  efivarfs gives a 4-byte
 * attribute word, then the data. */
static int efi_global_bool(struct nmbl_ctx *ctx, const char *name)
{
	_cleanup_free_ char *raw = NULL;
	size_t len;
	int r;

	if (!ctx)
		return -EINVAL;
	r = nmbl_efivar_read(ctx, NMBL_EFI_GLOBAL_GUID, name, 1, &raw, &len);
	if (r == -EFBIG)
		return -EBADMSG;
	if (r < 0)
		return r;
	if (len != 1 || (unsigned char)raw[0] > 1)
		return -EBADMSG;
	return raw[0];
}

NMBL_EXPORT int nmbl_get_secure_boot(struct nmbl_ctx *ctx)
{
	return efi_global_bool(ctx, "SecureBoot");
}

NMBL_EXPORT int nmbl_get_setup_mode(struct nmbl_ctx *ctx)
{
	return efi_global_bool(ctx, "SetupMode");
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
	nmbl_put_le64(le, indications);
	return nmbl_efivar_write(ctx, NMBL_EFI_GLOBAL_GUID, "OsIndications", le, sizeof(le));
}
