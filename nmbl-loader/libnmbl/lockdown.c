/* SPDX-License-Identifier: GPL-3.0-or-later */
/* The running kernel's lockdown, as securityfs shows it. */
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
