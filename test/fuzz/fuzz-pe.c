/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for the PE/UKI parser and the Authenticode reader: the same path a kernel or UKI named
 * in grub.cfg takes, from bytes to every getter. */
#include <stdint.h>
#include <string.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nmbl_image *img;
	const void *sec;
	size_t len, n, sum = 0;
	const char *v;

	if (nmbl_image_new_from_buffer(data, size, &img) < 0)
		return 0;
	v = nmbl_image_get_version(img);
	if (v)
		sum += strlen(v);
	n = nmbl_image_get_n_sections(img);
	for (size_t i = 0; i < n; i++) {
		char name[9];
		uint64_t s;

		if (nmbl_image_get_section(img, i, name, &s) == 0)
			sum += s + strlen(name);
	}
	static const char *const names[] = { ".linux", ".initrd", ".ucode", ".cmdline", ".osrel" };
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (nmbl_image_section_data(img, names[i], &sec, &len) == 0 && len)
			sum += ((const uint8_t *)sec)[len - 1];
	sum += nmbl_image_get_cmdline_max(img) + (size_t)nmbl_image_get_truncated(img);
	/* The Authenticode reader, on whatever the security directory holds. */
	char *signers = NULL;
	if (nmbl_pe_signers(nmbl_image_signing_pe(img), &signers) == 0)
		sum += strlen(signers);
	free(signers);
	nmbl_image_unref(img);
	return sum == (size_t)-1;
}
