/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init: What every step uses: its sentences on the console, the clocks, nmbl's own
 * command line.
 */
#include "init.h"

void say(const char *fmt, ...)
{
	va_list ap;

	fputs("nmbl-init: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Seconds since the kernel started, as its log counts them. */
double since_boot(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The value of KEY on the command line /proc/cmdline shows, or (AS_WRITTEN)
 * the parameter as written there, malloc'ed; NULL when absent or
 * unreadable. */
char *kernel_param(struct nmbl_ctx *ctx, const char *key, bool as_written)
{
	_cleanup_free_ char *cmdline = NULL;
	char *value;
	int r;

	if (nmbl_get_kernel_cmdline(ctx, &cmdline) < 0)
		return NULL;
	r = as_written ? nmbl_cmdline_get_param(cmdline, key, &value)
		       : nmbl_cmdline_get_value(cmdline, key, &value);
	return r < 0 ? NULL : value;
}

/* nmbl.shell or nmbl.shell=1, exactly as written, on nmbl's own command
 * line: what a debug build's UKI carries.  Anything else ("nmbl.shell=",
 * a quoted form) opens no shell.  Read once, at the start: a direct boot
 * binds the entry's line over /proc/cmdline, which must never grant it. */
bool shell_allowed(struct nmbl_ctx *ctx)
{
	_cleanup_free_ char *param = kernel_param(ctx, "nmbl.shell", true);

	return param && (strcmp(param, "nmbl.shell") == 0 || strcmp(param, "nmbl.shell=1") == 0);
}

/* NAME=SECONDS on nmbl's command line, DEFAULT_S when it is not there or
 * no number (which is said); *RET_EXPLICIT whether it is there. */
unsigned seconds_param(struct nmbl_ctx *ctx, const char *name, unsigned default_s,
			      bool *ret_explicit)
{
	_cleanup_free_ char *value = kernel_param(ctx, name, false);
	unsigned long seconds;
	char *end;

	*ret_explicit = value != NULL;
	if (!value)
		return default_s;
	errno = 0;
	seconds = strtoul(value, &end, 10);
	if (errno || end == value || *end || value[0] == '-' || seconds > INT_MAX) {
		say("%s=%s is no number of seconds: %u it is", name, value, default_s);
		return default_s;
	}
	return (unsigned)seconds;
}
