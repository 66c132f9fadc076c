/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init: Starting programs: the image's own, and the contained helpers.
 */
#include "init.h"

#define PRE_MENU_DIR "/usr/lib/nmbl/pre-menu.d"
#define SHELL "/bin/sh"
/* How long mdadm or LVM's tool may take: assembling or activating reads
 * a few sectors of each disk; a minute is a disk that does not answer. */
#define TOOL_SECONDS 60
/* What of a helper's words is said on the console. */
#define HELPER_SAID_MAX 2048

/* The image's own program ARGV (nmbl status, the pre-menu programs, a
 * debug build's shell), as root, its standard output on OUT_FD when that
 * is not -1, waited for, reaping whatever else ends meanwhile (process 1
 * adopts orphans): its exit status, 128 + signal, or -errno. */
int run(char *const argv[], int out_fd)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (out_fd >= 0)
			(void)dup2(out_fd, STDOUT_FILENO);
		(void)signal(SIGCHLD, SIG_DFL);
		execv(argv[0], argv);
		fprintf(stderr, "nmbl-init: cannot run %s: %m\n", argv[0]);
		_exit(127);
	}
	for (;;) {
		pid_t w = wait(&status);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == pid)
			break;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* What a helper said, as lines on the console, each "nmbl-init: NAME:
 * LINE", what a terminal would act on (escapes, other control bytes)
 * shown as '?': a helper taken over writes no sequence to the console. */
static void relay(const char *name, const char *said, size_t len)
{
	for (size_t i = 0; i < len;) {
		size_t end = i;
		char line[HELPER_SAID_MAX + 1];
		size_t n = 0;

		while (end < len && said[end] != '\n')
			end++;
		for (size_t j = i; j < end; j++)
			line[n++] = (unsigned char)said[j] < 0x20 || said[j] == 0x7f ? '?' : said[j];
		line[n] = '\0';
		if (n)
			say("%s: %s", name, line);
		i = end + 1;
	}
}

/*
 * A helper that reads untrusted bytes (the disk tools, the DHCP client),
 * started by nmbl_spawn() as a program taken over by those bytes would
 * have it: contained by CONTAIN, in namespaces of its own so that all it
 * starts ends with it, with the network only when NETWORK, its standard
 * output on OUT_FD when that is not -1, no input, and what it says on its
 * standard error (the first HELPER_SAID_MAX bytes) said on the console
 * after it ended, prefixed with NAME: always, or (QUIET) only when it
 * failed.  Ended after SECONDS (-ETIMEDOUT).  Its exit status, 128 +
 * signal, or -errno.
 */
int run_helper(const char *name, char *const argv[], int (*contain)(void), bool network,
	       int out_fd, unsigned seconds, bool quiet)
{
	struct nmbl_spawn_options o = {
		.contain = contain, .fd = { -1, out_fd, -1 }, .pass_fd = -1, .network = network,
	};
	long long deadline = now_ms() + seconds * 1000LL;
	char said[HELPER_SAID_MAX];
	size_t len = 0;
	unsigned left_s;
	bool ended = false;
	int err[2], pidfd = -1, r;
	pid_t pid;

	if (pipe2(err, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	o.fd[2] = err[1];
	pid = nmbl_spawn(argv, &o, &pidfd);
	close(err[1]);
	if (pid < 0) {
		close(err[0]);
		return pid;
	}
	/* Its words until it (and all it started) closed the pipe, or its
	 * deadline. */
	for (;;) {
		struct pollfd p = { .fd = err[0], .events = POLLIN };
		long long left = deadline - now_ms();
		char buf[512];
		ssize_t n;

		if (left <= 0) {
			(void)kill(pid, SIGKILL);
			ended = true;
			break;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			break;
		n = read(err[0], buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
		for (ssize_t i = 0; i < n && len < sizeof(said); i++)
			said[len++] = buf[i];
	}
	close(err[0]);
	/* A helper that closed its standard error may still run: what is
	 * left of its time, at least a second (0 waits without end). */
	left_s = deadline > now_ms() ? (unsigned)((deadline - now_ms()) / 1000 + 1) : 1;
	r = nmbl_spawn_wait(pid, pidfd, ended ? 0 : left_s);
	if (pidfd >= 0)
		close(pidfd);
	if (ended)
		r = -ETIMEDOUT;
	if (!quiet || r != 0)
		relay(name, said, len);
	return r;
}

/* A distribution's tool that reads what the disks hold, as a disk that
 * took it over would have it: contained (nmbl_contain_tool()), without
 * network, within TOOL_SECONDS. */
int run_tool(char *const argv[], int out_fd)
{
	const char *name = strrchr(argv[0], '/');

	return run_helper(name ? name + 1 : argv[0], argv, nmbl_contain_tool, false, out_fd,
			  TOOL_SECONDS, false);
}

/* What nmbl status says, each line as "nmbl: LINE". */
void print_status(void)
{
	char *argv[] = { "/usr/bin/nmbl", "status", NULL };
	char line[512];
	int fds[2];
	FILE *f;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return;
	f = fdopen(fds[0], "re");
	if (!f) {
		close(fds[0]);
		close(fds[1]);
		return;
	}
	/* The pipe holds far more than the status's few lines. */
	(void)run(argv, fds[1]);
	close(fds[1]);
	while (fgets(line, sizeof(line), f))
		printf("nmbl: %s", line);
	fflush(stdout);
	fclose(f);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

void run_pre_menu(void)
{
	struct dirent **list;
	int n = scandir(PRE_MENU_DIR, &list, NULL, by_name);

	for (int i = 0; i < n; i++) {
		char path[512];
		char *argv[] = { path, NULL };
		int r;

		snprintf(path, sizeof(path), PRE_MENU_DIR "/%s", list[i]->d_name);
		if (list[i]->d_name[0] != '.' && access(path, X_OK) == 0) {
			r = run(argv, -1);
			if (r != 0)
				say("%s failed (%d)", path, r);
		}
		free(list[i]);
	}
	if (n >= 0)
		free(list);
}

/* Only a debug build's signed command line has a shell offered
 * (ALLOWED, as it said at the start). */
void debug_shell(bool allowed)
{
	char *argv[] = { SHELL, NULL };

	if (!allowed || access(SHELL, X_OK) < 0)
		return;
	disarm_watchdog();
	say("nmbl.shell: a shell on the console; leave it to get the menu back");
	(void)run(argv, -1);
}
