/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init: Starting programs: the image's own, and the contained helpers.
 */
#include "init.h"

#define PRE_MENU_DIR "/usr/lib/nmbl/pre-menu.d"
#define SHELL "/bin/sh"

/* Run ARGV and wait for it, reaping whatever else ends meanwhile (process 1
 * adopts orphans), its standard output on OUT_FD when that is not -1,
 * contained by CONTAIN when that is not NULL, and ended after SECONDS
 * when that is not 0 (-ETIMEDOUT).  Its exit status, 128 + signal, or
 * -errno. */
int spawn_until(char *const argv[], int out_fd, int err_fd, int (*contain)(void),
		       unsigned seconds)
{
	pid_t pid = fork();
	bool ended = false;
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int r = contain ? contain() : 0;

		if (r < 0) {
			fprintf(stderr, "nmbl-init: cannot contain %s: %s\n", argv[0], strerror(-r));
			_exit(127);
		}
		if (out_fd >= 0)
			(void)dup2(out_fd, STDOUT_FILENO);
		if (err_fd >= 0)
			(void)dup2(err_fd, STDERR_FILENO);
		(void)signal(SIGCHLD, SIG_DFL);
		execv(argv[0], argv);
		fprintf(stderr, "nmbl-init: cannot run %s: %m\n", argv[0]);
		_exit(127);
	}
	/* Its end, or its deadline (a kernel without pidfds: no deadline). */
	if (seconds) {
		long long deadline = now_ms() + seconds * 1000LL;
		struct pollfd p = { .fd = (int)syscall(SYS_pidfd_open, pid, 0), .events = POLLIN };

		while (p.fd >= 0) {
			long long left = deadline - now_ms();
			int n = left > 0 ? poll(&p, 1, (int)left) : 0;

			if (n == 0) {
				(void)kill(pid, SIGKILL);
				ended = true;
			}
			if (n >= 0 || errno != EINTR)
				break;
		}
		if (p.fd >= 0)
			close(p.fd);
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
	if (ended)
		return -ETIMEDOUT;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int spawn(char *const argv[], int out_fd, int err_fd, int (*contain)(void))
{
	return spawn_until(argv, out_fd, err_fd, contain, 0);
}

int run(char *const argv[], int out_fd)
{
	return spawn(argv, out_fd, -1, NULL);
}

/* A distribution's tool that reads what the disks hold, as a disk that
 * took it over would have it: contained (nmbl_contain_tool()). */
int run_tool(char *const argv[], int out_fd)
{
	return spawn(argv, out_fd, -1, nmbl_contain_tool);
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
