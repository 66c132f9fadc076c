/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for GRUB's names of md arrays and LVM volumes, made from
 * what a disk holds (an md member's name and UUID, as libblkid reads
 * them) and what device-mapper says: the input is two strings, split at
 * its first NUL.  A name written into the menu's device map must never
 * hold what ends or splits a device map line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *name)
{
	if (name && strpbrk(name, " \t\n()\\,"))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *a = malloc(size + 2), *b, *name = NULL, *id = NULL;

	if (!a)
		__builtin_trap();
	memcpy(a, data, size);
	a[size] = a[size + 1] = '\0';
	b = a + strlen(a) + (strlen(a) < size ? 1 : 0);
	if (nmbl_md_map_names(a, b, &name, &id) == 0) {
		check_name(name);
		check_name(id);
		free(name);
		free(id);
	}
	name = id = NULL;
	if (nmbl_lvm_map_names(a, b, &name, &id) == 0) {
		check_name(name);
		check_name(id);
		free(name);
		free(id);
	}
	free(a);
	return 0;
}
