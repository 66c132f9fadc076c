/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for the reader of the TPM's answer to
 * TPM2_GetCapability(TPM_CAP_PCRS): which PCR banks to extend.  What the
 * device sends is bounds-checked as any input. */
#include <stdint.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint16_t algs[5];
	size_t n = 99;

	if (nmbl_tpm_parse_banks(data, size, algs, 5, &n) < 0)
		return 0;
	if (n > 5)
		__builtin_trap();
	return 0;
}
