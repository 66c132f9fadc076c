/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for the kernel command line splitter, and for the probes
 * direct boot runs on the start of a device (file system, LUKS, LVM, md).
 * Joining the words split from a line and splitting again must give the
 * same words. */
#include <stdint.h>
#include <string.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nmbl_cmdline *c = NULL, *again = NULL;
	struct nmbl_probe probe;
	size_t sum = 0, len = 0;
	char *joined, *p;

	if (nmbl_probe_buffer(data, size, &probe) == 0)
		sum += (probe.fstype != NULL) + (probe.stacked != NULL);
	if (nmbl_cmdline_parse((const char *)data, size, &c) < 0)
		return 0;
	for (size_t i = 0; i < c->n; i++)
		len += strlen(c->params[i].word) + 1;
	joined = p = malloc(len + 1);
	if (!joined)
		__builtin_trap();
	*p = '\0';
	for (size_t i = 0; i < c->n; i++) {
		char *v = nmbl_param_value(&c->params[i]);

		if (!*c->params[i].word || !v)
			__builtin_trap();
		sum += strlen(v) + (nmbl_cmdline_find(c, c->params[i].key) != NULL);
		free(v);
		/* No blank after the last: it may be inside an open quote. */
		if (i)
			*p++ = ' ';
		p = stpcpy(p, c->params[i].word);
	}
	if (nmbl_cmdline_parse(joined, strlen(joined), &again) < 0 || again->n != c->n)
		__builtin_trap();
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(again->params[i].word, c->params[i].word) != 0 ||
		    strcmp(again->params[i].key, c->params[i].key) != 0)
			__builtin_trap();
	nmbl_cmdline_free(again);
	nmbl_cmdline_free(c);
	free(joined);
	return sum == (size_t)-1;
}
