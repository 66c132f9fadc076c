/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The hardware watchdog that resets a machine whose nmbl hangs before
 * its menu is up, so that the firmware falls back to the nmbl it booted
 * before (nmbl-init(8)).  nmbl-init arms it and hands the descriptor
 * down in the environment, as systemd hands down sockets (LISTEN_FDS):
 * the menu disarms it once drawn, libnmbl at a hand-over the menu was
 * skipped for.  A watchdog that keeps running after that would reset
 * the booted system, or a user at the menu: one the kernel says could
 * never be stopped again is never started.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "nmbl-private.h"

/* The first watchdog the kernel registered: /dev/watchdog is the same. */
#define NMBL_WATCHDOG_NAME "watchdog0"

NMBL_EXPORT int nmbl_watchdog_arm(struct nmbl_ctx *ctx, unsigned seconds, int *ret_fd,
				  char **ret_identity)
{
	char nowayout[16], identity[64] = "";
	_cleanup_free_ char *class = NULL, *dev = NULL, *name = NULL;
	_cleanup_close_ int fd = -1;
	unsigned got = seconds;
	int r;

	if (!ctx || !seconds || seconds > INT_MAX || !ret_fd)
		return -EINVAL;
	class = nmbl_path(ctx, "/sys/class/watchdog/" NMBL_WATCHDOG_NAME);
	dev = nmbl_path(ctx, "/dev/" NMBL_WATCHDOG_NAME);
	if (!class || !dev)
		return -ENOMEM;
	if (access(class, F_OK) < 0)
		return -ENOENT;
	/* Built with WATCHDOG_NOWAYOUT, or nowayout=1: once started it would
	 * run on into the booted system, which may not know it.  A kernel
	 * without WATCHDOG_SYSFS does not say. */
	r = nmbl_read_small(ctx, "/sys/class/watchdog/" NMBL_WATCHDOG_NAME "/nowayout",
			    nowayout, sizeof(nowayout));
	if (r >= 0 && strcmp(nowayout, "0") != 0)
		return -EBUSY;
	(void)nmbl_read_small(ctx, "/sys/class/watchdog/" NMBL_WATCHDOG_NAME "/identity",
			      identity, sizeof(identity));
	name = strdup(identity);
	if (!name)
		return -ENOMEM;
	fd = nmbl_sys_watchdog_open(dev);
	if (fd < 0)
		return fd;
	/* Running now, for the driver's own timeout: set ours, or stop it. */
	r = nmbl_sys_watchdog_set_timeout(fd, &got);
	if (r == 0 && got < seconds)
		r = -ERANGE;
	if (r < 0) {
		int s = nmbl_sys_watchdog_stop(TAKE_FD(fd));

		if (s < 0)
			nmbl_notice(ctx, "watchdog: no timeout of %u s (%s), and it cannot be stopped: %s",
				    seconds, strerror(-r), strerror(-s));
		return r;
	}
	if (got != seconds)
		nmbl_info(ctx, "watchdog: %u s asked, the driver set %u s", seconds, got);
	*ret_fd = TAKE_FD(fd);
	if (ret_identity)
		*ret_identity = TAKE_PTR(name);
	return 0;
}

NMBL_EXPORT int nmbl_watchdog_disarm(void)
{
	const char *value = getenv(NMBL_WATCHDOG_FD);
	bool valid;
	char *end;
	long fd;

	if (!value)
		return 0;
	errno = 0;
	fd = strtol(value, &end, 10);
	valid = !errno && end != value && !*end && fd > STDERR_FILENO && fd <= INT_MAX;
	/* Once only: the descriptor is closed now, its number free for any
	 * file to take. */
	(void)unsetenv(NMBL_WATCHDOG_FD);
	if (!valid)
		return -EBADF;
	return nmbl_sys_watchdog_stop((int)fd);
}
