/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for the broker's reader of the menu's requests: the
 * menu is the side that may have been taken over.  What it returns points
 * inside the datagram, at NUL-terminated fields. */
#include <stdint.h>
#include <string.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nmbl_broker_message m;
	size_t sum = 0;

	if (nmbl_broker_parse(data, size, &m) < 0)
		return 0;
	if (m.n_fields > NMBL_BROKER_FIELDS_MAX)
		__builtin_trap();
	for (size_t i = 0; i < m.n_fields; i++) {
		if (m.fields[i] < (const char *)data || m.fields[i] >= (const char *)data + size)
			__builtin_trap();
		sum += strlen(m.fields[i]);
	}
	return sum == (size_t)-1;
}
