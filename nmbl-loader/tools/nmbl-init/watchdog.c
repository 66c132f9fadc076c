/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init: The watchdog, against a new nmbl that hangs before its menu.
 */
#include "init.h"

/* How long nmbl may take from loading its drivers to showing its menu
 * before the watchdog resets the machine, unless nmbl.watchdog= says.
 * The menu is up 1.3 s after the drivers in a VM under TCG (some ten
 * times slower than hardware); the longest wait of a healthy start is
 * for the ESP's disk, ESP_WAIT_SECONDS.  Four times that, and a machine
 * left alone is still back on the previous nmbl within a few minutes. */
#define WATCHDOG_DEFAULT_S 120

/* Against a hang from here until the menu is up: every program started
 * from now on gets the watchdog's descriptor, named in NMBL_WATCHDOG_FD,
 * and the menu disarms it.  No watchdog is no error. */
void arm_watchdog(struct nmbl_ctx *ctx)
{
	_cleanup_free_ char *identity = NULL;
	bool explicit;
	unsigned seconds = seconds_param(ctx, "nmbl.watchdog", WATCHDOG_DEFAULT_S, &explicit);
	char fd_text[16];
	int fd, r;

	if (!seconds)
		return;
	r = nmbl_watchdog_arm(ctx, seconds, &fd, &identity);
	if (r == -ENOENT) {
		if (explicit)
			say("nmbl.watchdog=%u, but this machine has no watchdog", seconds);
		return;
	}
	if (r == -EBUSY) {
		say("the watchdog is not used: once started, it could not be stopped (nowayout)");
		return;
	}
	if (r < 0) {
		say("the watchdog is not used: cannot set a timeout of %u s: %s", seconds,
		    strerror(-r));
		return;
	}
	snprintf(fd_text, sizeof(fd_text), "%d", fd);
	if (fcntl(fd, F_SETFD, 0) < 0 || setenv(NMBL_WATCHDOG_FD, fd_text, 1) < 0)
		say("the menu cannot stop the watchdog (%m): it resets the machine in %u s",
		    seconds);
	else
		say("watchdog armed (%s): the machine resets in %u s unless the menu comes up",
		    *identity ? identity : "unnamed", seconds);
}

void disarm_watchdog(void)
{
	int r = nmbl_watchdog_disarm();

	if (r < 0)
		say("the watchdog cannot be stopped (%s): it will reset the machine",
		    strerror(-r));
}
