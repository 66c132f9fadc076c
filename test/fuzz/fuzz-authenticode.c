/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for the Authenticode reader alone: the bytes are a PE
 * image's certificate table (WIN_CERTIFICATE entries holding PKCS#7), so
 * the fuzzer spends its time in the signature walk and OpenSSL's parsing
 * rather than in getting past the PE headers. */
#include <stdint.h>
#include <string.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nmbl_pe pe = {
		.buf = data,
		.len = size,
		.cert_offset = 0,
		.cert_size = (uint32_t)size,
	};
	char *signers = NULL;
	size_t sum = 0;

	if (size > UINT32_MAX)
		return 0;
	if (nmbl_pe_signers(&pe, &signers) == 0)
		sum = strlen(signers);
	free(signers);
	return sum == (size_t)-1;
}
