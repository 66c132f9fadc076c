/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * UTF-16LE, the string encoding of EFI variables and load options, to and
 * from UTF-8.  Input comes from firmware and may be broken: an unpaired
 * surrogate becomes U+FFFD rather than an error, as a menu would rather
 * show a strange character than nothing.
 */
#include <string.h>

#include "nmbl-private.h"

#define REPLACEMENT 0xfffd

static size_t put_utf8(uint32_t c, char *out)
{
	if (c < 0x80) {
		out[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = (char)(0xc0 | c >> 6);
		out[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		out[0] = (char)(0xe0 | c >> 12);
		out[1] = (char)(0x80 | (c >> 6 & 0x3f));
		out[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | c >> 18);
	out[1] = (char)(0x80 | (c >> 12 & 0x3f));
	out[2] = (char)(0x80 | (c >> 6 & 0x3f));
	out[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

int nmbl_utf16_to_utf8(const void *buf, size_t len, char **ret)
{
	const unsigned char *p = buf;
	size_t n = len / 2, o = 0;
	char *out;

	/* Each UTF-16 unit gives at most 3 bytes; a pair gives 4 for 2. */
	out = malloc(n * 3 + 1);
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint32_t c = nmbl_le16(p + 2 * i);

		if (c == 0)
			break;
		if (c >= 0xd800 && c < 0xdc00 && i + 1 < n) {
			uint32_t lo = nmbl_le16(p + 2 * (i + 1));

			if (lo >= 0xdc00 && lo < 0xe000) {
				c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
				i++;
			} else {
				c = REPLACEMENT;
			}
		} else if (c >= 0xd800 && c < 0xe000) {
			c = REPLACEMENT;
		}
		o += put_utf8(c, out + o);
	}
	out[o] = '\0';
	*ret = out;
	return 0;
}

/* The next code point of S, advancing it; malformed bytes give U+FFFD. */
static uint32_t next_utf8(const unsigned char **s)
{
	const unsigned char *p = *s;
	uint32_t c = *p++;
	int more;

	if (c < 0x80)
		more = 0;
	else if ((c & 0xe0) == 0xc0)
		more = 1, c &= 0x1f;
	else if ((c & 0xf0) == 0xe0)
		more = 2, c &= 0x0f;
	else if ((c & 0xf8) == 0xf0)
		more = 3, c &= 0x07;
	else
		more = -1;
	for (int i = 0; i < more; i++, p++) {
		if ((*p & 0xc0) != 0x80) {
			more = -1;
			break;
		}
		c = c << 6 | (*p & 0x3f);
	}
	*s = p;
	if (more < 0 || c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
		return REPLACEMENT;
	return c;
}

int nmbl_utf8_to_utf16(const char *s, void **ret, size_t *ret_len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 0, size = (strlen(s) + 1) * 2;
	unsigned char *out;

	/* No character takes more UTF-16 bytes than UTF-8 bytes + 1. */
	out = malloc(size + 2);
	if (!out)
		return -ENOMEM;
	while (*p) {
		uint32_t c = next_utf8(&p);

		if (c >= 0x10000) {
			uint32_t v = c - 0x10000;
			uint16_t hi = (uint16_t)(0xd800 | v >> 10);
			uint16_t lo = (uint16_t)(0xdc00 | (v & 0x3ff));

			nmbl_put_le16(out + n, hi);
			n += 2;
			c = lo;
		}
		nmbl_put_le16(out + n, (uint16_t)c);
		n += 2;
	}
	nmbl_put_le16(out + n, 0);
	n += 2;
	*ret = out;
	*ret_len = n;
	return 0;
}
