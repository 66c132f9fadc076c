/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for the UEFI signature database parser: the bytes are
 * the value of db or dbx as efivarfs gives it (without the attribute
 * word), EFI_SIGNATURE_LISTs.  Every entry must lie inside them; the
 * certificates are parsed as the firmware check parses them, and the
 * database is then used as db and as dbx for a small unsigned image. */
#include <openssl/x509.h>
#include <stdint.h>
#include <string.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The smallest PE32+ image EDK2 loads: headers only, no sections. */
static void make_image(unsigned char *b, size_t len)
{
	memset(b, 0, len);
	b[0] = 'M';
	b[1] = 'Z';
	b[0x3c] = 0x40;
	memcpy(b + 0x40, "PE\0\0", 4);
	b[0x44] = 0x64; /* x86-64 */
	b[0x45] = 0x86;
	b[0x54] = 112 + 16 * 8; /* optional header size */
	b[0x58] = 0x0b;         /* PE32+ */
	b[0x59] = 0x02;
	b[0x58 + 60] = (unsigned char)(len & 0xff); /* SizeOfHeaders */
	b[0x58 + 61] = (unsigned char)(len >> 8);
	b[0x58 + 108] = 16; /* directories */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct nmbl_sigdb empty;
	unsigned char image[0x200];
	struct nmbl_sigdb *db = NULL;
	struct nmbl_pe pe;
	char *signer = NULL;
	size_t sum = 0;

	if (nmbl_sigdb_parse(data, size, &db) < 0)
		return 0;
	for (size_t i = 0; i < db->n; i++) {
		const struct nmbl_sig *s = &db->sigs[i];

		if (s->data < data || s->len == 0 || s->len > size ||
		    s->data - data > (ptrdiff_t)(size - s->len))
			__builtin_trap();
		sum += s->data[s->len - 1];
		if (s->type == NMBL_SIG_X509) {
			const unsigned char *p = s->data;
			X509 *x = d2i_X509(NULL, &p, (long)s->len);

			X509_free(x);
		}
	}
	make_image(image, sizeof(image));
	if (nmbl_pe_parse(image, sizeof(image), &pe) < 0)
		__builtin_trap();
	if (nmbl_pe_check_firmware(&pe, db, &empty, &signer) == 0)
		free(signer);
	if (nmbl_pe_check_firmware(&pe, &empty, db, &signer) == 0)
		free(signer);
	nmbl_sigdb_free(db);
	return sum == (size_t)-1;
}
