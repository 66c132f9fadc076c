/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The broker protocol's messages (libnmbl.h names the requests): what the
 * unprivileged menu sends, read and checked here before the privileged
 * side acts on any of it.  A message is one SOCK_SEQPACKET datagram: a
 * header of two 32-bit words in the machine's byte order (the request, or
 * the result of a reply, and the number of fields), then that many
 * NUL-terminated fields and nothing after them.  Each request has a fixed
 * number of fields, each field a shape; whatever breaks them is -EBADMSG,
 * and the request is refused whole.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nmbl-private.h"

enum field {
	F_PCR,     /* GRUB's: 8 (strings) or 9 (files), no other */
	F_DISK,    /* "/dev/NAME", a block device's name */
	F_SECTOR,  /* a decimal number of 512-byte sectors */
	F_PATH,    /* an absolute path inside a file system, no ".." */
	F_TEXT,    /* any text (a GRUB name, a description, an entry's id) */
	F_CMDLINE, /* a kernel command line, within NMBL_CMDLINE_MAX */
};

static const struct {
	bool known;
	unsigned n;
	enum field fields[4];
} requests[] = {
	[NMBL_BROKER_MEASURE] = { true, 2, { F_PCR, F_TEXT } },
	[NMBL_BROKER_KERNEL] = { true, 4, { F_DISK, F_SECTOR, F_PATH, F_TEXT } },
	[NMBL_BROKER_INITRD] = { true, 4, { F_DISK, F_SECTOR, F_PATH, F_TEXT } },
	[NMBL_BROKER_BOOT] = { true, 2, { F_CMDLINE, F_TEXT } },
	[NMBL_BROKER_CHAINLOAD] = { true, 3, { F_DISK, F_SECTOR, F_PATH } },
	[NMBL_BROKER_FIRMWARE_SETUP] = { true, 0, { 0 } },
	[NMBL_BROKER_ENTRY_REQUESTS] = { true, 0, { 0 } },
	[NMBL_BROKER_MENU_SHOWN] = { true, 0, { 0 } },
	[NMBL_BROKER_GRUBENV_WRITE] = { true, 2, { F_DISK, F_SECTOR } },
};
_Static_assert(ELEMENTSOF(requests[0].fields) <= NMBL_BROKER_FIELDS_MAX, "fields");

#define HEADER_SIZE 8

static bool valid_number(const char *s, uint64_t *ret)
{
	uint64_t v = 0;

	if (!*s || (s[0] == '0' && s[1]))
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*ret = v;
	return true;
}

static bool valid_path(const char *s)
{
	if (s[0] != '/')
		return false;
	for (const char *p = s; (p = strstr(p, "/..")); p += 3)
		if (p[3] == '/' || p[3] == '\0')
			return false;
	return true;
}

static bool valid_field(enum field f, const char *s, size_t len)
{
	uint64_t v;

	switch (f) {
	case F_PCR:
		return valid_number(s, &v) &&
		       (v == NMBL_PCR_GRUB_STRINGS || v == NMBL_PCR_GRUB_FILES);
	case F_DISK:
		return strncmp(s, "/dev/", 5) == 0 && nmbl_valid_block_name(s + 5);
	case F_SECTOR:
		return valid_number(s, &v) && v <= UINT64_MAX / 512;
	case F_PATH:
		return valid_path(s);
	case F_TEXT:
		return true;
	case F_CMDLINE:
		return len < NMBL_CMDLINE_MAX;
	}
	return false;
}

int nmbl_broker_parse(const void *buf, size_t len, struct nmbl_broker_message *ret)
{
	const char *p = (const char *)buf + HEADER_SIZE, *end = (const char *)buf + len;
	uint32_t type, n;

	if (len < HEADER_SIZE || len > NMBL_BROKER_MESSAGE_MAX)
		return -EBADMSG;
	memcpy(&type, buf, 4);
	memcpy(&n, (const char *)buf + 4, 4);
	if (type >= ELEMENTSOF(requests) || !requests[type].known || requests[type].n != n)
		return -EBADMSG;
	for (uint32_t i = 0; i < n; i++) {
		size_t flen = strnlen(p, (size_t)(end - p));

		if (p + flen == end || !valid_field(requests[type].fields[i], p, flen))
			return -EBADMSG;
		ret->fields[i] = p;
		p += flen + 1;
	}
	if (p != end)
		return -EBADMSG;
	ret->request = (enum nmbl_broker_request)type;
	ret->n_fields = n;
	return 0;
}

int nmbl_broker_build(uint32_t word, const char *const *fields, size_t n, void *buf,
		      size_t size, size_t *ret_len)
{
	char *p = (char *)buf + HEADER_SIZE;
	uint32_t count = (uint32_t)n;

	if (size < HEADER_SIZE || n > NMBL_BROKER_FIELDS_MAX)
		return -EINVAL;
	memcpy(buf, &word, 4);
	memcpy((char *)buf + 4, &count, 4);
	for (size_t i = 0; i < n; i++) {
		size_t flen = strlen(fields[i]) + 1;

		if ((size_t)((char *)buf + size - p) < flen)
			return -E2BIG;
		memcpy(p, fields[i], flen);
		p += flen;
	}
	*ret_len = (size_t)(p - (char *)buf);
	return 0;
}
