/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-console [--contained] COMMAND [ARG]...
 *
 * Run COMMAND (the menu) on every console the kernel writes to at once:
 * the serial line and the screen alike, whichever the user looks at.
 * /dev/console is only the last console= of the command line, so the menu
 * gets pseudo-terminals instead, one laid out for each kind of console:
 * the screen's, of the screen's size, on its standard input and output
 * (and for any further console), and, when there is a serial line beside
 * a screen, the serial line's on the descriptor GRUB_EMU_SERIAL_FD names
 * (its speed in GRUB_EMU_SERIAL_SPEED), which grub-emu draws on as a
 * terminal of its own, at GRUB's serial size (grub-emu-patches/0030).
 * What the menu writes on each goes to its consoles, and a key typed on
 * any console reaches it.  With a single console, COMMAND simply runs on
 * it.
 *
 * Keys are only keys: no key typed on a console may signal or stop the
 * menu.  The terminal's signal and flow-control characters are switched
 * off (Ctrl-C, Ctrl-\, Ctrl-Z, Ctrl-S reach the menu as bytes), the
 * signals a terminal sends are ignored by COMMAND too (ignored signals
 * stay ignored across exec), and COMMAND dies with nmbl-console rather
 * than be left on a terminal nobody reads.  A console that hangs up is
 * dropped; the others go on.
 *
 * With --contained, COMMAND runs without root's powers
 * (nmbl_contain_menu()): the consoles and the pseudo-terminal are opened
 * first, as root, and COMMAND cannot open any itself.
 *
 * nmbl's init starts nmbl-console as the first process of a PID namespace
 * of the menu's own: nmbl-console ends as soon as COMMAND does, even when
 * something COMMAND started still holds the pseudo-terminal, and the
 * kernel then ends all that is left of the menu.
 *
 * Exit status: COMMAND's, 128 + the signal that ended it, or 1 when it
 * could not be started.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "libnmbl.h"
#include "macro.h"

#define MAX_CONSOLES 8

struct console {
	int fd;
	struct termios saved;
	bool raw;
	/* The pseudo-terminal it shows and types into: the screen's or the
	 * serial line's. */
	int master;
};

static struct console consoles[MAX_CONSOLES];
static size_t n_consoles;

/* "tty0 ttyS0" from sysfs: every console= the kernel took. */
static void open_consoles(void)
{
	char buf[256], *name, *save = NULL;
	FILE *f = fopen("/sys/class/tty/console/active", "re");

	if (!f)
		return;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	for (name = strtok_r(buf, " \n", &save); name && n_consoles < MAX_CONSOLES;
	     name = strtok_r(NULL, " \n", &save)) {
		char path[64];
		int fd;

		if (strchr(name, '/'))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", name);
		fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			continue;
		consoles[n_consoles++].fd = fd;
	}
}

static void restore_consoles(void)
{
	for (size_t i = 0; i < n_consoles; i++)
		if (consoles[i].raw)
			tcsetattr(consoles[i].fd, TCSANOW, &consoles[i].saved);
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = { .fd = fd, .events = POLLOUT };

				/* A slow serial line: wait, but never for ever. */
				if (poll(&p, 1, 1000) <= 0)
					return;
				continue;
			}
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

/* What a terminal can send, and a write to a console that hung up. */
static void ignore_terminal_signals(void)
{
	static const int sigs[] = { SIGINT, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGHUP, SIGPIPE };

	for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
		(void)signal(sigs[i], SIG_IGN);
}

/* No character typed on FD makes the kernel send a signal, or stop the
 * menu's output (Ctrl-S). */
static void no_signal_keys(int fd)
{
	struct termios t;

	if (tcgetattr(fd, &t) == 0) {
		t.c_lflag &= ~(tcflag_t)ISIG;
		t.c_iflag &= ~(tcflag_t)(IXON | IXOFF);
		(void)tcsetattr(fd, TCSANOW, &t);
	}
}

static bool contained;

/* What MASTER's side wrote, to the consoles that show it. */
static void show(int master, const char *buf, size_t len)
{
	for (size_t i = 0; i < n_consoles; i++)
		if (consoles[i].master == master)
			write_all(consoles[i].fd, buf, len);
}

/* What COMMAND wrote before it ended, to each console, waiting for none. */
static void drain(int master)
{
	char buf[4096];
	ssize_t n;

	if (master < 0 || fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK) < 0)
		return;
	while ((n = read(master, buf, sizeof(buf))) > 0)
		show(master, buf, (size_t)n);
}

/* A serial line's speed in bits per second, 0 when unknown. */
static unsigned long line_speed(int fd)
{
	static const struct {
		speed_t code;
		unsigned long bps;
	} speeds[] = { { B9600, 9600 },	    { B19200, 19200 },	 { B38400, 38400 },
		       { B57600, 57600 },   { B115200, 115200 }, { B230400, 230400 },
		       { B460800, 460800 }, { B921600, 921600 } };
	struct termios t;

	if (tcgetattr(fd, &t) < 0)
		return 0;
	for (size_t i = 0; i < ELEMENTSOF(speeds); i++)
		if (cfgetospeed(&t) == speeds[i].code)
			return speeds[i].bps;
	return 0;
}

/* A pseudo-terminal of size WS, its master side; -1 on failure. */
static int open_pty(const struct winsize *ws)
{
	int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);

	if (master < 0)
		return -1;
	if (grantpt(master) < 0 || unlockpt(master) < 0) {
		close(master);
		return -1;
	}
	ioctl(master, TIOCSWINSZ, ws);
	return master;
}

/* COMMAND in place of this process, contained if asked; returns only on
 * failure, and never runs COMMAND uncontained when asked otherwise. */
static void exec_command(char **argv)
{
	int r = contained ? nmbl_contain_menu() : 0;

	if (r < 0) {
		fprintf(stderr, "nmbl-console: cannot contain %s: %s\n", argv[0], strerror(-r));
		return;
	}
	execvp(argv[0], argv);
	fprintf(stderr, "nmbl-console: cannot run %s: %s\n", argv[0], strerror(errno));
}

static int run_direct(char **argv)
{
	no_signal_keys(STDIN_FILENO);
	exec_command(argv);
	return EXIT_FAILURE;
}

int main(int argc, char **argv)
{
	struct pollfd fds[MAX_CONSOLES + 3];
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	const struct winsize serial_ws = { .ws_row = 24, .ws_col = 80 };
	int master, serial_master = -1, status, pidfd;
	size_t serial = SIZE_MAX, screen = SIZE_MAX;
	char buf[4096], speed[24] = "";
	pid_t pid, parent = getpid();

	if (argc >= 2 && strcmp(argv[1], "--contained") == 0) {
		contained = true;
		argc--;
		argv++;
	}
	if (argc < 2 || strcmp(argv[1], "--help") == 0) {
		fprintf(argc < 2 ? stderr : stdout,
			"Usage: nmbl-console [--contained] COMMAND [ARG]...\n"
			"Run COMMAND on every active console at once.\n");
		return argc < 2 ? 2 : 0;
	}
	ignore_terminal_signals();
	open_consoles();
	if (n_consoles < 2)
		return run_direct(argv + 1);

	/* The screen knows its size; a serial line says 0x0. */
	for (size_t i = 0; i < n_consoles; i++) {
		struct winsize w;

		if (ioctl(consoles[i].fd, TIOCGWINSZ, &w) == 0 && w.ws_row && w.ws_col) {
			if (screen == SIZE_MAX) {
				ws = w;
				screen = i;
			}
		} else if (serial == SIZE_MAX) {
			serial = i;
		}
	}
	master = open_pty(&ws);
	if (master < 0)
		return run_direct(argv + 1);
	for (size_t i = 0; i < n_consoles; i++)
		consoles[i].master = master;
	/* A serial line beside a screen: a terminal of its own. */
	if (serial != SIZE_MAX && screen != SIZE_MAX) {
		serial_master = open_pty(&serial_ws);
		if (serial_master >= 0) {
			consoles[serial].master = serial_master;
			snprintf(speed, sizeof(speed), "%lu", line_speed(consoles[serial].fd));
		}
	}

	pid = fork();
	if (pid < 0)
		return run_direct(argv + 1);
	if (pid == 0) {
		int slave;

		setsid();
		slave = open(ptsname(master), O_RDWR);
		if (slave < 0)
			_exit(EXIT_FAILURE);
		ioctl(slave, TIOCSCTTY, 0);
		no_signal_keys(slave);
		dup2(slave, 0);
		dup2(slave, 1);
		dup2(slave, 2);
		if (slave > 2)
			close(slave);
		/* On a descriptor of its own, whichever is free: those the
		 * menu inherits (the broker's, the watchdog's) stay. */
		if (serial_master >= 0) {
			int line = open(ptsname(serial_master), O_RDWR | O_NOCTTY);
			char line_fd[16];

			if (line < 0)
				_exit(EXIT_FAILURE);
			no_signal_keys(line);
			snprintf(line_fd, sizeof(line_fd), "%d", line);
			if (setenv("GRUB_EMU_SERIAL_FD", line_fd, 1) < 0 ||
			    (*speed && setenv("GRUB_EMU_SERIAL_SPEED", speed, 1) < 0))
				_exit(EXIT_FAILURE);
		}
		/* Killed or crashed, nmbl-console takes the menu along; asked
		 * for here, as changing users forgets it. */
		if (contained) {
			int r = nmbl_contain_menu();

			if (r < 0) {
				fprintf(stderr, "nmbl-console: cannot contain %s: %s\n", argv[1],
					strerror(-r));
				_exit(EXIT_FAILURE);
			}
			contained = false;
		}
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(EXIT_FAILURE);
		exec_command(argv + 1);
		_exit(127);
	}

	/* Keys go through as they are typed; the menu sets its own modes. */
	for (size_t i = 0; i < n_consoles; i++) {
		struct termios t;

		if (tcgetattr(consoles[i].fd, &consoles[i].saved) < 0)
			continue;
		t = consoles[i].saved;
		cfmakeraw(&t);
		consoles[i].raw = tcsetattr(consoles[i].fd, TCSANOW, &t) == 0;
	}
	fds[0] = (struct pollfd){ .fd = master, .events = POLLIN };
	for (size_t i = 0; i < n_consoles; i++)
		fds[i + 1] = (struct pollfd){ .fd = consoles[i].fd, .events = POLLIN };
	/* COMMAND's end, which its own children cannot hide by keeping the
	 * pseudo-terminal open (without pidfds: the terminal's hang-up). */
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	fds[n_consoles + 1] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
	fds[n_consoles + 2] = (struct pollfd){ .fd = serial_master, .events = POLLIN };

	for (;;) {
		ssize_t n;

		if (poll(fds, n_consoles + 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (fds[n_consoles + 1].revents) {
			drain(master);
			drain(serial_master);
			break;
		}
		if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(master, buf, sizeof(buf));
			/* EIO: the menu closed its side, it has ended. */
			if (n <= 0)
				break;
			show(master, buf, (size_t)n);
		}
		if (fds[n_consoles + 2].revents) {
			n = read(serial_master, buf, sizeof(buf));
			if (n > 0)
				show(serial_master, buf, (size_t)n);
			else if (!(n < 0 && (errno == EAGAIN || errno == EINTR)))
				fds[n_consoles + 2].fd = -1;
		}
		for (size_t i = 0; i < n_consoles; i++) {
			short ev = fds[i + 1].revents;

			if (!ev)
				continue;
			n = (ev & POLLIN) ? read(consoles[i].fd, buf, sizeof(buf)) : 0;
			if (n > 0) {
				write_all(consoles[i].master, buf, (size_t)n);
				continue;
			}
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			/* Hung up or gone: poll would report it again at once,
			 * for ever.  The menu goes on on the other consoles. */
			fds[i + 1].fd = -1;
		}
	}
	restore_consoles();
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return EXIT_FAILURE;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
