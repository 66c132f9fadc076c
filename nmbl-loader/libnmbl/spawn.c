/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The one way nmbl starts a program that reads untrusted bytes: the menu,
 * mdadm and LVM's tool, dhcpcd, the fetcher.  Each is assumed taken over
 * by what it reads, so what it starts must not outlive it: it runs as the
 * first process of a PID namespace of its own, and when it ends, or is
 * ended, the kernel ends every process it started, whatever session or
 * process group they put themselves in, before its parent sees it end.
 * It gets only the descriptors it is given (never the console unless it
 * is the menu, never the watchdog), an IPC namespace of its own, and an
 * empty network namespace unless its job is the network.
 */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nmbl-private.h"

/* Descriptor FD, or /dev/null when it is -1, as descriptor TARGET. */
static int place_fd(int fd, int target)
{
	int r;

	if (fd < 0)
		fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = fd == target ? fcntl(fd, F_SETFD, 0) : dup2(fd, target);
	return r < 0 ? -errno : 0;
}

/* In the child: its descriptors, signals and environment, then O's
 * containment, then ARGV.  Never returns. */
static void __attribute__((noreturn)) exec_helper(char *const argv[],
						  const struct nmbl_spawn_options *o)
{
	int fds[4] = { o->fd[0], o->fd[1], o->fd[2], o->pass_fd };
	int keep = o->pass_fd >= 0 ? 4 : 3, r = 0;
	sigset_t all;

	/* Out of the way of 0 to 3 first, so that placing one does not
	 * overwrite another. */
	for (int i = 0; i < keep; i++)
		if (fds[i] >= 0 && (fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10)) < 0)
			_exit(127);
	for (int i = 0; i < keep && r >= 0; i++)
		r = place_fd(fds[i], i);
	if (r < 0)
		_exit(127);
	/* No other descriptor of the caller's: the console, the watchdog,
	 * the uevents' socket. */
	if (syscall(SYS_close_range, (unsigned)keep, ~0U, 0) < 0)
		for (int fd = keep; fd < 1024; fd++)
			(void)close(fd);
	for (int sig = 1; sig < NSIG; sig++)
		(void)signal(sig, SIG_DFL);
	sigemptyset(&all);
	(void)sigprocmask(SIG_SETMASK, &all, NULL);
	/* Without the console as input, not of its session either. */
	if (o->fd[0] < 0)
		(void)setsid();
	(void)unsetenv(NMBL_WATCHDOG_FD);
	if (o->env && putenv((char *)o->env) < 0)
		_exit(127);
	r = o->contain ? o->contain() : 0;
	if (r < 0) {
		dprintf(STDERR_FILENO, "cannot contain %s: %s\n", argv[0], strerror(-r));
		_exit(127);
	}
	execv(argv[0], argv);
	dprintf(STDERR_FILENO, "cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

NMBL_EXPORT pid_t nmbl_spawn(char *const argv[], const struct nmbl_spawn_options *options,
			     int *ret_pidfd)
{
	unsigned long flags = CLONE_NEWPID | CLONE_NEWIPC | SIGCHLD;
	pid_t pid;

	if (!argv || !argv[0] || !options || !ret_pidfd)
		return -EINVAL;
	if (!options->network)
		flags |= CLONE_NEWNET;
	/* clone(2) as fork(2) does it, but for the namespaces: the child only
	 * sets up its descriptors and executes the program. */
	pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
	if (pid < 0)
		return -errno;
	if (pid == 0)
		exec_helper(argv, options);
	*ret_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (*ret_pidfd >= 0)
		(void)fcntl(*ret_pidfd, F_SETFD, FD_CLOEXEC);
	return pid;
}

NMBL_EXPORT int nmbl_spawn_wait(pid_t pid, int pidfd, unsigned timeout_s)
{
	long long deadline = nmbl_now_ms() + timeout_s * 1000LL;
	bool ended = false;
	int status;

	if (pid <= 0)
		return -EINVAL;
	/* Its end, or its deadline (a kernel without pidfds: no deadline). */
	while (timeout_s && pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		long long left = deadline - nmbl_now_ms();
		int n = left > 0 ? poll(&p, 1, (int)left) : 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			/* The namespace's first process: all it started ends
			 * with it. */
			(void)kill(pid, SIGKILL);
			ended = true;
		}
		break;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (ended)
		return -ETIMEDOUT;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

NMBL_EXPORT int nmbl_read_helper_file(const char *path, uid_t owner, size_t max, char **ret,
				      size_t *ret_len)
{
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (!path || !ret || !ret_len)
		return -EINVAL;
	/* Not through a link (which would copy a file only root reads to
	 * where the helper's reader reads), never blocking (a FIFO would
	 * hold process 1 for ever), never a terminal of ours. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != owner)
		return -EPERM;
	return nmbl_read_fd(fd, max, ret, ret_len);
}
