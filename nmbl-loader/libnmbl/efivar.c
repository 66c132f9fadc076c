/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * EFI variables as efivarfs shows them: a file "<name>-<vendor guid>" whose
 * first four bytes are the attributes, then the value.  What nmbl writes is
 * non-volatile with boot service and runtime access: after ExitBootServices
 * UEFI lets no one create anything else.  Each such write wears the
 * firmware's flash, so a variable that already holds the value is left
 * as it is: asking again for what is there writes nothing.
 */
#include <stdio.h>
#include <string.h>

#include "nmbl-private.h"

#define EFI_VARIABLE_NON_VOLATILE 0x1
#define EFI_VARIABLE_BOOTSERVICE_ACCESS 0x2
#define EFI_VARIABLE_RUNTIME_ACCESS 0x4

static char *efivar_path(const struct nmbl_ctx *ctx, const char *guid, const char *name,
			 bool with_root)
{
	char *path;

	if (asprintf(&path, "%s" NMBL_EFIVARS "%s-%s", with_root ? ctx->root : "", name,
		     guid) < 0)
		return NULL;
	return path;
}

int nmbl_efivar_read(const struct nmbl_ctx *ctx, const char *guid, const char *name,
		     size_t max, char **ret, size_t *ret_len)
{
	_cleanup_free_ char *path = efivar_path(ctx, guid, name, false), *raw = NULL;
	size_t len;
	int r;

	if (!path)
		return -ENOMEM;
	r = nmbl_read_file(ctx, path, max + 4, &raw, &len);
	if (r < 0)
		return r;
	if (len < 4)
		return -EBADMSG;
	memmove(raw, raw + 4, len - 4 + 1);
	*ret_len = len - 4;
	*ret = TAKE_PTR(raw);
	return 0;
}

int nmbl_efivar_write(const struct nmbl_ctx *ctx, const char *guid, const char *name,
		      const void *value, size_t len)
{
	_cleanup_free_ char *path = efivar_path(ctx, guid, name, true);
	_cleanup_free_ char *rel = efivar_path(ctx, guid, name, false), *old = NULL;
	_cleanup_free_ unsigned char *data = malloc(4 + len);
	uint32_t attrs = EFI_VARIABLE_NON_VOLATILE | EFI_VARIABLE_BOOTSERVICE_ACCESS |
			 EFI_VARIABLE_RUNTIME_ACCESS;
	size_t old_len;

	if (!path || !rel || !data)
		return -ENOMEM;
	nmbl_put_le32(data, attrs);
	memcpy(data + 4, value, len);
	if (nmbl_read_file(ctx, rel, 4 + len, &old, &old_len) == 0 && old_len == 4 + len &&
	    memcmp(old, data, 4 + len) == 0)
		return 0;
	return nmbl_sys_efivar_write(path, data, 4 + len);
}

int nmbl_efivar_delete(const struct nmbl_ctx *ctx, const char *guid, const char *name)
{
	_cleanup_free_ char *path = efivar_path(ctx, guid, name, true);

	if (!path)
		return -ENOMEM;
	return nmbl_sys_efivar_delete(path);
}
