/* SPDX-License-Identifier: GPL-3.0-or-later */
/* nmbl_spawn(): what a helper starts ends with it, it gets no descriptor
 * of ours but those given, and a containment that fails runs nothing.
 * The test runs as root, as nmbl's init does (PID namespaces). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libnmbl.h"
#include "unit.h"

#define SH "/bin/sh"

/* Whether a process whose command line holds TOKEN runs (in any PID
 * namespace: /proc here is the test's). */
static bool running(const char *token)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	bool found = false;

	CHECK(d != NULL);
	while (d && (de = readdir(d)) && !found) {
		char path[300], cmdline[4096];
		ssize_t n;
		int fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, cmdline, sizeof(cmdline) - 1);
		close(fd);
		for (ssize_t i = 0; i < n; i++)
			if (cmdline[i] == '\0')
				cmdline[i] = ' ';
		found = n > 0 && (cmdline[n] = '\0', strstr(cmdline, token) != NULL);
	}
	if (d)
		closedir(d);
	return found;
}

static int spawn_and_wait(char *const argv[], const struct nmbl_spawn_options *o,
			  unsigned timeout_s)
{
	int pidfd = -1, r;
	pid_t pid = nmbl_spawn(argv, o, &pidfd);

	CHECK(pid > 0);
	r = nmbl_spawn_wait(pid, pidfd, timeout_s);
	if (pidfd >= 0)
		close(pidfd);
	return r;
}

/* A helper that leaves a process behind, in a session of its own, as a
 * tool taken over would: the process is gone once the helper is reaped. */
static void test_what_a_helper_starts_ends_with_it(void)
{
	char token[64], script[512];
	char *argv[] = { SH, "-c", script, NULL };
	struct nmbl_spawn_options o = { .fd = { -1, -1, -1 }, .pass_fd = -1 };

	snprintf(token, sizeof(token), "nmbl-escapee-%d", (int)getpid());
	/* The escapee's name is its first argument (sh -c's $0), which its
	 * command line shows; the helper ends as soon as it started it. */
	snprintf(script, sizeof(script),
		 "setsid " SH " -c 'sleep 600' %s </dev/null >/dev/null 2>&1 & "
		 "while ! grep -q %s /proc/[0-9]*/cmdline 2>/dev/null; do sleep 0.05; done",
		 token, token);
	CHECK_INT(spawn_and_wait(argv, &o, 30), 0);
	CHECK(!running(token));
}

/* Descriptors 0 to 3 and no other: not one of ours left open across exec
 * (the console, the watchdog), nor the environment's watchdog. */
static void test_a_helper_gets_only_its_descriptors(void)
{
	char *argv[] = { SH, "-c",
			 "cd /proc/self/fd && echo * && echo \"${NMBL_WATCHDOG_FD-none} $NMBL_X\"",
			 NULL };
	struct nmbl_spawn_options o = { .fd = { -1, -1, -1 }, .pass_fd = -1, .env = "NMBL_X=y" };
	int out[2], leaked = open("/dev/null", O_RDONLY), pass = open("/dev/null", O_RDONLY);
	char buf[256] = "";
	ssize_t n;

	CHECK(leaked >= 0 && pass >= 0);
	CHECK_INT(pipe(out), 0);
	o.fd[1] = out[1];
	o.pass_fd = pass;
	CHECK_INT(setenv(NMBL_WATCHDOG_FD, "5", 1), 0);
	CHECK_INT(spawn_and_wait(argv, &o, 30), 0);
	unsetenv(NMBL_WATCHDOG_FD);
	close(out[1]);
	n = read(out[0], buf, sizeof(buf) - 1);
	CHECK(n > 0);
	/* The shell's own descriptor for the directory it lists may show. */
	CHECK(strncmp(buf, "0 1 2 3\n", 8) == 0 || strncmp(buf, "0 1 2 3 4\n", 10) == 0);
	CHECK(strstr(buf, "\nnone y\n") != NULL);
	close(out[0]);
	close(leaked);
	close(pass);
}

/* A helper past its time is ended, with all it started. */
static void test_a_helper_past_its_time_is_ended(void)
{
	char token[64], script[128];
	char *argv[] = { SH, "-c", script, NULL };
	struct nmbl_spawn_options o = { .fd = { -1, -1, -1 }, .pass_fd = -1, .network = true };

	snprintf(token, sizeof(token), "nmbl-late-%d", (int)getpid());
	snprintf(script, sizeof(script), SH " -c 'sleep 600' %s & sleep 600", token);
	CHECK_INT(spawn_and_wait(argv, &o, 1), -ETIMEDOUT);
	CHECK(!running(token));
}

static int refuse(void)
{
	return -EPERM;
}

/* A containment that fails runs nothing. */
static void test_a_failed_containment_runs_nothing(void)
{
	const char *marker = fixture_path("/ran");
	char script[256];
	char *argv[] = { SH, "-c", script, NULL };
	struct nmbl_spawn_options o = { .contain = refuse, .fd = { -1, -1, -1 }, .pass_fd = -1 };

	snprintf(script, sizeof(script), "touch %s", marker);
	CHECK_INT(spawn_and_wait(argv, &o, 30), 127);
	CHECK(access(marker, F_OK) < 0);
	o.contain = NULL;
	CHECK_INT(spawn_and_wait(argv, &o, 30), 0);
	CHECK_INT(access(marker, F_OK), 0);
}

/* What a helper wrote is read only when it is a regular file of its
 * user's, within a size: not through a link, not from a FIFO (without
 * blocking), not anyone else's. */
static void test_a_helpers_file_is_read_only_as_what_it_is(void)
{
	/* fixture_path() has one buffer. */
	char *lease = strdup(fixture_path("/eth0.lease")), *link = strdup(fixture_path("/link.lease")),
	     *fifo = strdup(fixture_path("/fifo.lease")), *secret = strdup(fixture_path("/secret"));
	char *data = NULL;
	size_t len = 0;

	fixture_text("/eth0.lease", "answer");
	fixture_text("/secret", "root's only");
	CHECK_INT(chown(lease, 65532, 65532), 0);
	CHECK_INT(chmod(secret, 0600), 0);
	CHECK_INT(symlink(secret, link), 0);
	CHECK_INT(mkfifo(fifo, 0600), 0);
	CHECK_INT(chown(fifo, 65532, 65532), 0);
	CHECK_INT(nmbl_read_helper_file(lease, 65532, 4096, &data, &len), 0);
	CHECK(len == 6 && strcmp(data, "answer") == 0);
	free(data);
	data = NULL;
	CHECK_INT(nmbl_read_helper_file(link, 65532, 4096, &data, &len), -ELOOP);
	CHECK_INT(nmbl_read_helper_file(fifo, 65532, 4096, &data, &len), -EPERM);
	CHECK_INT(nmbl_read_helper_file(secret, 65532, 4096, &data, &len), -EPERM);
	CHECK_INT(nmbl_read_helper_file(lease, 65532, 5, &data, &len), -EFBIG);
	CHECK(data == NULL);
	free(lease);
	free(link);
	free(fifo);
	free(secret);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_a_helpers_file_is_read_only_as_what_it_is,
		test_what_a_helper_starts_ends_with_it,
		test_a_helper_gets_only_its_descriptors,
		test_a_helper_past_its_time_is_ended,
		test_a_failed_containment_runs_nothing,
		NULL,
	};

	return unit_main(tests);
}
