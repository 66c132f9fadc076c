/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

static struct nmbl_ctx *ctx;

/* A machine whose first watchdog says whether it may be stopped again. */
static void machine(const char *nowayout)
{
	remove(fixture_path("/sys/class/watchdog/watchdog0/nowayout"));
	rmdir(fixture_path("/sys/class/watchdog/watchdog0"));
	if (nowayout)
		fixture_text("/sys/class/watchdog/watchdog0/nowayout", nowayout);
	fake.calls[0] = '\0';
	fake.watchdog_errno = fake.watchdog_timeout_errno = fake.watchdog_stop_errno = 0;
	fake.watchdog_timeout_set = 0;
	unsetenv(NMBL_WATCHDOG_FD);
}

/* FD named to the programs to come, as nmbl-init names it. */
static void hand_down(int fd)
{
	char text[16];

	snprintf(text, sizeof(text), "%d", fd);
	CHECK_INT(setenv(NMBL_WATCHDOG_FD, text, 1), 0);
}

static void test_no_watchdog_is_no_error_and_nothing_is_started(void)
{
	int fd = -1;

	machine(NULL);
	CHECK_INT(nmbl_watchdog_arm(ctx, 120, &fd, NULL), -ENOENT);
	CHECK_INT(fd, -1);
	CHECK_STR(fake.calls, "");
	/* Nothing named: nothing to disarm. */
	CHECK_INT(nmbl_watchdog_disarm(), 0);
	CHECK_STR(fake.calls, "");
}

static void test_armed_with_the_timeout_asked(void)
{
	char *identity = NULL;
	int fd = -1;

	machine("0\n");
	CHECK_INT(nmbl_watchdog_arm(ctx, 120, &fd, NULL), 0);
	CHECK_STR(fake.calls, "watchdog_open /dev/watchdog0;watchdog_timeout 120;");
	CHECK(fd > STDERR_FILENO);
	CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC);
	/* The menu disarms it, once. */
	hand_down(fd);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_watchdog_disarm(), 0);
	CHECK_STR(fake.calls, "watchdog_stop;");
	CHECK(!getenv(NMBL_WATCHDOG_FD));
	CHECK(fcntl(fd, F_GETFD) < 0);
	CHECK_INT(nmbl_watchdog_disarm(), 0);
	CHECK_STR(fake.calls, "watchdog_stop;");
	/* The driver's name for it, for the console. */
	machine("0\n");
	fixture_text("/sys/class/watchdog/watchdog0/identity", "i6300ESB timer\n");
	CHECK_INT(nmbl_watchdog_arm(ctx, 30, &fd, &identity), 0);
	CHECK_STR(identity, "i6300ESB timer");
	free(identity);
	close(fd);
	remove(fixture_path("/sys/class/watchdog/watchdog0/identity"));
	/* A kernel without WATCHDOG_SYSFS says neither that nor nowayout. */
	machine("0\n");
	remove(fixture_path("/sys/class/watchdog/watchdog0/nowayout"));
	CHECK_INT(nmbl_watchdog_arm(ctx, 30, &fd, &identity), 0);
	CHECK_STR(fake.calls, "watchdog_open /dev/watchdog0;watchdog_timeout 30;");
	CHECK_STR(identity, "");
	free(identity);
	close(fd);
}

/* Once started, it would run on into the booted system. */
static void test_a_watchdog_that_cannot_stop_is_never_started(void)
{
	int fd = -1;

	machine("1\n");
	CHECK_INT(nmbl_watchdog_arm(ctx, 120, &fd, NULL), -EBUSY);
	CHECK_STR(fake.calls, "");
	CHECK_INT(fd, -1);
}

/* Opening it started it with the driver's own timeout: without ours, it
 * is stopped again. */
static void test_without_its_timeout_it_is_stopped_again(void)
{
	int fd = -1;

	machine("0\n");
	fake.watchdog_timeout_errno = -EINVAL;
	CHECK_INT(nmbl_watchdog_arm(ctx, 5000, &fd, NULL), -EINVAL);
	CHECK_STR(fake.calls, "watchdog_open /dev/watchdog0;watchdog_timeout 5000;watchdog_stop;");
	CHECK_INT(fd, -1);
	/* Shorter than asked would reset a healthy boot. */
	machine("0\n");
	fake.watchdog_timeout_set = 60;
	CHECK_INT(nmbl_watchdog_arm(ctx, 120, &fd, NULL), -ERANGE);
	CHECK_STR(fake.calls, "watchdog_open /dev/watchdog0;watchdog_timeout 120;watchdog_stop;");
	/* Longer is a little later, and taken. */
	machine("0\n");
	fake.watchdog_timeout_set = 121;
	CHECK_INT(nmbl_watchdog_arm(ctx, 120, &fd, NULL), 0);
	close(fd);
	/* Not there after all. */
	machine("0\n");
	fake.watchdog_errno = -ENOENT;
	CHECK_INT(nmbl_watchdog_arm(ctx, 120, &fd, NULL), -ENOENT);
	CHECK_INT(nmbl_watchdog_arm(ctx, 0, &fd, NULL), -EINVAL);
}

static void test_disarm_takes_only_a_descriptor_named_right(void)
{
	static const char *const bad[] = { "", "x", "7x", "-3", "1", "2", "99999999999" };

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		machine("0\n");
		CHECK_INT(setenv(NMBL_WATCHDOG_FD, bad[i], 1), 0);
		CHECK_INT(nmbl_watchdog_disarm(), -EBADF);
		CHECK_STR(fake.calls, "");
		CHECK(!getenv(NMBL_WATCHDOG_FD));
	}
	/* A number no file has. */
	machine("0\n");
	hand_down(1000);
	CHECK_INT(nmbl_watchdog_disarm(), -EBADF);
	CHECK_STR(fake.calls, "");
}

/* Reported, never hidden: it will reset the machine. */
static void test_a_watchdog_that_keeps_running_is_reported(void)
{
	int fd = -1;

	machine("0\n");
	CHECK_INT(nmbl_watchdog_arm(ctx, 120, &fd, NULL), 0);
	hand_down(fd);
	fake.watchdog_stop_errno = -EBUSY;
	CHECK_INT(nmbl_watchdog_disarm(), -EBUSY);
	CHECK(!getenv(NMBL_WATCHDOG_FD));
}

/* A menu skipped: the hand-over stops it, before the kernel takes over. */
static void test_the_hand_over_disarms(void)
{
	int fd = -1;

	machine("0\n");
	remove(fixture_path("/proc/1/comm"));
	CHECK_INT(nmbl_watchdog_arm(ctx, 120, &fd, NULL), 0);
	hand_down(fd);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_reboot(ctx), 0);
	CHECK_STR(fake.calls, "watchdog_stop;reboot;");
	/* Nothing named any more. */
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_reboot(ctx), 0);
	CHECK_STR(fake.calls, "reboot;");
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_no_watchdog_is_no_error_and_nothing_is_started,
		test_armed_with_the_timeout_asked,
		test_a_watchdog_that_cannot_stop_is_never_started,
		test_without_its_timeout_it_is_stopped_again,
		test_disarm_takes_only_a_descriptor_named_right,
		test_a_watchdog_that_keeps_running_is_reported,
		test_the_hand_over_disarms,
		NULL,
	};

	return unit_main_ctx(tests, &ctx);
}
