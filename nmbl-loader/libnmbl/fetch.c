/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * A file from the network, for a network boot: nmbl-fetch (libcurl, in a
 * process of its own, contained as the menu is but for its sockets:
 * nmbl_contain_fetcher()) writes it into a memory
 * file this side seals once it is whole.  Nothing here parses what the
 * network sent; the helper's progress lines and its one sentence of
 * failure are all that is read back, each bounded.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nmbl-private.h"

#define HELPER "/usr/libexec/nmbl/nmbl-fetch"
#define ERROR_MAX 512
/* How often the caller hears of a fetch, even when no byte came: it may
 * want to cancel it. */
#define TICK_MS 200
/* The helper keeps its own time limits; this one is for a helper that
 * does not. */
#define GRACE_S 5

/* The last complete "DONE TOTAL" line of what came on FD; false at its
 * end. */
static bool read_progress(int fd, char *line, size_t *len, uint64_t *done, uint64_t *total)
{
	char buf[256];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return false;

	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] != '\n') {
			if (*len < 63)
				line[(*len)++] = buf[i];
			continue;
		}
		line[*len] = '\0';
		(void)sscanf(line, "%" SCNu64 " %" SCNu64, done, total);
		*len = 0;
	}
	return true;
}

/* More of the helper's sentence; false at its end. */
static bool read_error(int fd, char *text, size_t *len)
{
	ssize_t n = *len < ERROR_MAX - 1 ? read(fd, text + *len, ERROR_MAX - 1 - *len) : 0;

	if (n > 0)
		*len += (size_t)n;
	text[*len] = '\0';
	return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

/* The helper, by nmbl_spawn(): all it starts ends with it, it has the
 * network but no other descriptor of the caller's.  The file on 1, the
 * sentence on 2, progress on 3. */
static pid_t start_helper(struct nmbl_ctx *ctx, const char *url,
			  const struct nmbl_fetch_options *o, int out, int progress, int error,
			  int *ret_pidfd)
{
	struct nmbl_spawn_options spawn = {
		.contain = o->contain ? nmbl_contain_fetcher : NULL,
		.fd = { -1, out, error },
		.pass_fd = progress,
		.network = true,
	};
	_cleanup_free_ char *helper = nmbl_path(ctx, HELPER);
	char max[32], timeout[32], stall[32];
	const char *argv[12];
	size_t n = 0;

	if (!helper)
		return -ENOMEM;
	snprintf(max, sizeof(max), "%" PRIu64, o->max_size);
	snprintf(timeout, sizeof(timeout), "%u", o->timeout_s);
	snprintf(stall, sizeof(stall), "%u", o->stall_s);
	argv[n++] = helper;
	argv[n++] = "--max-size";
	argv[n++] = max;
	argv[n++] = "--timeout";
	argv[n++] = timeout;
	argv[n++] = "--stall";
	argv[n++] = stall;
	argv[n++] = "--progress-fd=3";
	if (o->ca_file) {
		argv[n++] = "--ca-file";
		argv[n++] = o->ca_file;
	}
	argv[n++] = url;
	argv[n] = NULL;
	return nmbl_spawn((char *const *)argv, &spawn, ret_pidfd);
}

/* Wait for PID, telling O's progress function as it goes; its exit
 * status, or -ECANCELED, -ETIMEDOUT when it was ended. */
static int watch_helper(pid_t pid, int pidfd, const struct nmbl_fetch_options *o, int progress,
			int error, char *text, size_t *text_len)
{
	long long deadline = nmbl_now_ms() + ((long long)o->timeout_s + GRACE_S) * 1000;
	uint64_t done = 0, total = 0;
	char line[64];
	size_t line_len = 0;
	bool progress_open = true, error_open = true;
	int ended = 0, status;

	for (;;) {
		/* A pipe at its end is polled no more: it would wake the loop
		 * at once, again and again, until the helper is reaped. */
		struct pollfd p[3] = {
			{ .fd = progress_open ? progress : -1, .events = POLLIN },
			{ .fd = error_open ? error : -1, .events = POLLIN },
			{ .fd = pidfd, .events = POLLIN },
		};
		int n = poll(p, pidfd >= 0 ? 3 : 2, TICK_MS);

		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			progress_open = read_progress(progress, line, &line_len, &done, &total);
		if (n > 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
			error_open = read_error(error, text, text_len);
		if (pidfd >= 0 && n > 0 && p[2].revents)
			break;
		if (pidfd < 0 && waitpid(pid, &status, WNOHANG) == pid)
			goto reaped;
		if (!ended && o->progress && o->progress(o->data, done, total) < 0)
			ended = -ECANCELED;
		if (!ended && nmbl_now_ms() > deadline)
			ended = -ETIMEDOUT;
		if (ended) {
			kill(pid, SIGKILL);
			break;
		}
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
reaped:
	if (pidfd >= 0)
		close(pidfd);
	/* What it said last, after it ended. */
	read_error(error, text, text_len);
	if (ended)
		return ended;
	if (!WIFEXITED(status))
		return -EIO;
	if (WEXITSTATUS(status) == 0 && o->progress)
		(void)o->progress(o->data, done, total);
	return WEXITSTATUS(status);
}

NMBL_EXPORT int nmbl_fetch(struct nmbl_ctx *ctx, const char *url,
			   const struct nmbl_fetch_options *options, int *ret_fd,
			   char **ret_error)
{
	struct nmbl_fetch_options o = {
		.max_size = NMBL_FETCH_MAX_DEFAULT,
		.timeout_s = NMBL_FETCH_TIMEOUT_DEFAULT,
		.stall_s = NMBL_FETCH_STALL_DEFAULT,
	};
	_cleanup_close_ int out = -1, progress_r = -1, progress_w = -1, error_r = -1,
			    error_w = -1;
	char text[ERROR_MAX] = "";
	size_t text_len = 0;
	int fds[2], r, pidfd = -1;
	pid_t pid;

	if (!ctx || !url || !ret_fd)
		return -EINVAL;
	if (options)
		o = *options;
	out = memfd_create("nmbl-fetched", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (out < 0)
		return -errno;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	progress_r = fds[0];
	progress_w = fds[1];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	error_r = fds[0];
	error_w = fds[1];
	pid = start_helper(ctx, url, &o, out, progress_w, error_w, &pidfd);
	if (pid < 0)
		return pid;
	close(TAKE_FD(progress_w));
	close(TAKE_FD(error_w));
	(void)fcntl(progress_r, F_SETFL, O_NONBLOCK);
	(void)fcntl(error_r, F_SETFL, O_NONBLOCK);
	r = watch_helper(pid, pidfd, &o, progress_r, error_r, text, &text_len);
	/* One sentence: the helper's first line. */
	text[strcspn(text, "\n")] = '\0';
	if (r != 0) {
		if (ret_error && *text)
			*ret_error = strdup(text);
		if (r == NMBL_FETCH_NOT_FOUND)
			return -ENOENT;
		return r < 0 ? r : -EIO;
	}
	if (fcntl(out, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
	    lseek(out, 0, SEEK_SET) < 0)
		return -errno;
	*ret_fd = TAKE_FD(out);
	return 0;
}
