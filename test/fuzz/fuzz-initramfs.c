/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for the initramfs reader: the bytes of an entry's initrd,
 * as nmbl would unpack them on the running kernel.  Every entry it gives
 * lies inside the input or the decompressed stream, with a name that ends
 * where its size says. */
#include <stdint.h>
#include <string.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int touch(const struct nmbl_cpio_entry *e, void *userdata)
{
	size_t *sum = userdata;

	*sum += strlen(e->name) + e->mode;
	if (e->size)
		*sum += e->data[0] + e->data[e->size - 1];
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t sum = 0;

	/* A bound small enough that a decompression bomb costs little. */
	(void)nmbl_initramfs_walk(data, size, 8u << 20, touch, &sum);
	return sum == 1 ? 1 : 0;
}
