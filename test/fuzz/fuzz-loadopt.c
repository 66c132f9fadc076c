/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for the EFI load-option decoder: a Boot#### value as
 * efivarfs gives it (without the attribute word).  What decodes to a file
 * on a GPT partition is encoded again and must decode to the same. */
#include <stdint.h>
#include <string.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nmbl_load_option *opt = NULL, *again = NULL;
	const char *partuuid, *file;
	const void *extra;
	void *buf = NULL;
	size_t len, sum = 0;

	if (nmbl_load_option_parse(data, size, &opt) < 0)
		return 0;
	sum += nmbl_load_option_get_attributes(opt);
	sum += strlen(nmbl_load_option_get_description(opt));
	sum += strlen(nmbl_load_option_get_device_path(opt));
	len = nmbl_load_option_get_optional_data(opt, &extra);
	if (len)
		sum += ((const uint8_t *)extra)[len - 1];
	partuuid = nmbl_load_option_get_partuuid(opt);
	file = nmbl_load_option_get_file(opt);
	if (partuuid && file &&
	    nmbl_load_option_build(nmbl_load_option_get_description(opt), partuuid, 1, 0, 1,
				   file, &buf, &len) == 0) {
		if (nmbl_load_option_parse(buf, len, &again) < 0 ||
		    strcmp(nmbl_load_option_get_partuuid(again), partuuid) != 0)
			__builtin_trap();
		nmbl_load_option_free(again);
		free(buf);
	}
	nmbl_load_option_free(opt);
	return sum == (size_t)-1;
}
