/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for the kernel uevent parser nmbl-init feeds every
 * message of the uevent socket to.  What it returns points inside the
 * message, at NUL-terminated text. */
#include <stdint.h>
#include <string.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *msg = (const char *)data;
	struct nmbl_uevent ev;
	const char *fields[4];
	size_t sum = 0;

	if (nmbl_uevent_parse(msg, size, &ev) < 0)
		return 0;
	fields[0] = ev.action;
	fields[1] = ev.subsystem;
	fields[2] = ev.devname;
	fields[3] = ev.modalias;
	for (size_t i = 0; i < 4; i++) {
		if (!fields[i])
			continue;
		if (fields[i] < msg || fields[i] >= msg + size)
			__builtin_trap();
		sum += strlen(fields[i]);
	}
	if (!*ev.action)
		__builtin_trap();
	return sum == (size_t)-1;
}
