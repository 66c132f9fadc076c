/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init - process 1 of nmbl's initramfs.
 *
 * Brings up what the menu needs and nothing more: the kernel's file
 * systems, the modules of the disks and keyboards present, the disks'
 * /dev/disk/by-* links, then the menu.  For as long as the menu runs, a
 * child follows the kernel's uevents, so that a keyboard plugged in (or a
 * USB disk found) later gets its driver too.  Before the menu, the
 * programs in /usr/lib/nmbl/pre-menu.d run in order.
 *
 * A new nmbl that fails must leave the machine to the firmware, which
 * then starts the nmbl it booted before: a panic reboots (panic= on the
 * UKI's command line), and a hang before the menu is up is reset by the
 * machine's watchdog, armed here once its driver is loaded and disarmed
 * by the menu once drawn (or at the hand-over, when it is skipped).
 *
 * The menu runs contained (no root, no capabilities, a seccomp filter)
 * and asks this process, its broker, for what needs root (libnmbl's
 * broker.c checks each request).  It runs in PID and IPC namespaces of
 * its own: whatever it starts, even in a session of its own, ends with it
 * (the kernel ends a PID namespace's every process when its first one
 * ends), before anything else happens here, so nothing of a menu taken
 * over by a GRUB bug lives on into the booted system, a kexec, a reboot
 * or the next menu.  Its exit status says what comes next
 * (libnmbl.h's NMBL_EXIT_*), when the broker agrees: 100, the broker
 * mounted the chosen entry's root on /sysroot (a direct boot), so switch
 * root to it and start its init; 101, it loaded the entry's kernel, so
 * kexec; 0, the user asked for a reboot; anything else (an exit status, a
 * signal, a crash, the OOM killer) is a failure of nmbl itself: say so,
 * undo what the broker prepared, and show the menu again.  Once the
 * broker has asked the firmware to start something (chainloader, fwsetup),
 * the machine reboots to it however the menu ended.
 *
 * Under Secure Boot this image is the boot loader the firmware trusts, so
 * nothing a console user types may give more than GRUB would: no shell,
 * whatever happens to the menu.  A shell exists only when nmbl's own
 * (signed) command line has nmbl.shell, which only a debug build sets,
 * and the image carries one.  The console's SysRq keys may sync, remount
 * read-only, reboot and set the log level, never signal a process.
 */
#include <sys/reboot.h>

#include "init.h"

/* A menu that fails this soon, this often in a row, waits before it is
 * started again, rather than keep a CPU busy. */
#define MENU_FAST_FAIL_MS 2000
#define MENU_FAST_FAILS 5
#define MENU_RETRY_WAIT_S 5

int main(int argc, char **argv)
{
	struct nmbl_ctx *ctx = NULL;
	struct nmbl_network_boot *net = NULL;
	char *link;
	double modules_at, esp_at;
	pid_t follower;
	bool shell, network;
	int fd, r;

	(void)argc;
	(void)argv;
	if (getpid() != 1) {
		fputs("nmbl-init: only the initramfs's process 1 runs this\n", stderr);
		return 2;
	}
	mount_api();
	open_console();
	restrict_sysrq();
	r = nmbl_new("/", &ctx);
	if (r < 0) {
		say("cannot start: %s", strerror(-r));
		for (;;)
			pause();
	}
	shell = shell_allowed(ctx);

	fd = open_uevents();
	if (fd < 0)
		say("no device events (%s): devices added later get no driver", strerror(-fd));
	link_present_disks(ctx);
	r = nmbl_coldplug(ctx);
	if (r < 0)
		say("loading the modules of the devices present: %s", strerror(-r));
	modules_at = since_boot();
	/* As soon as its driver is there. */
	arm_watchdog(ctx);
	mount_firmware_fs(ctx);
	/* Started from a disk's partition, or else perhaps from the network,
	 * where there is no ESP to wait for. */
	link = esp_link(ctx);
	if (!link && nmbl_get_network_boot(ctx, &net) < 0)
		net = NULL;
	if (fd >= 0 && link) {
		wait_for_esp(ctx, link, fd);
		/* What came while the ESP's disk was found: keyboards, more disks. */
		drain_uevents(ctx, fd);
	}
	free(link);
	network = net && start_network(ctx, fd, net);
	net = nmbl_network_boot_free(net);
	follower = fd >= 0 ? follow_uevents(ctx, fd) : -1;
	esp_at = since_boot();

	/* Where the time went (the benchmark reads it). */
	say("startup: modules loaded at %.3f s, %s at %.3f s", modules_at,
	    network ? "the network" : "the ESP's disk", esp_at);
	print_status();
	run_pre_menu();
	/* nmbl is the boot loader: it measures what it boots. */
	nmbl_set_measure(ctx, true);
	for (int fast_fails = 0;;) {
		long long started = now_ms();
		struct nmbl_broker *broker = NULL;

		r = run_menu(ctx, network, &broker);
		if (broker) {
			if (follower > 0) {
				kill(follower, SIGKILL);
				(void)waitpid(follower, NULL, 0);
				follower = -1;
			}
			nmbl_broker_free(broker);
		}
		/* The kernel to kexec is in the kernel's memory by now: the
		 * mounts that held its files go first, or the volumes under
		 * them could not. */
		if (r == NMBL_EXIT_KEXEC)
			(void)nmbl_umount_all(ctx);
		if (r == NMBL_EXIT_KEXEC || r == NMBL_EXIT_SWITCH_ROOT)
			stop_volumes();
		if (r == NMBL_EXIT_KEXEC) {
			r = nmbl_exec(ctx);
			say("cannot start the kernel: %s; the boot menu comes back",
			    nmbl_strerror(r));
			(void)nmbl_unload(ctx);
			(void)nmbl_umount_all(ctx);
			follower = fd >= 0 ? follow_uevents(ctx, fd) : -1;
			continue;
		} else if (r == NMBL_EXIT_SWITCH_ROOT) {
			/* The target inherits neither the watchdog nor its
			 * descriptor. */
			disarm_watchdog();
			if (network)
				stop_network();
			switch_root(ctx);
			say("switching root failed; rebooting");
			debug_shell(shell);
			sync();
			(void)reboot(RB_AUTOBOOT);
		} else if (r == NMBL_EXIT_REBOOT) {
			say("the boot menu ended; rebooting");
			sync();
			(void)reboot(RB_AUTOBOOT);
		}
		if (r > 128 && r < 128 + NSIG)
			say("the boot menu was ended by signal %d (%s); it comes back",
			    r - 128, strsignal(r - 128));
		else
			say("the boot menu failed (%s %d); it comes back",
			    r < 0 ? "error" : "status", r);
		/* The follower may have been killed too (by the OOM killer, say):
		 * devices added from now on still get their drivers. */
		if (follower <= 0 || waitpid(follower, NULL, WNOHANG) == follower ||
		    (kill(follower, 0) < 0 && errno == ESRCH))
			follower = fd >= 0 ? follow_uevents(ctx, fd) : -1;
		debug_shell(shell);
		fast_fails = now_ms() - started < MENU_FAST_FAIL_MS ? fast_fails + 1 : 0;
		if (fast_fails >= MENU_FAST_FAILS) {
			say("the boot menu keeps failing; trying again in %d seconds",
			    MENU_RETRY_WAIT_S);
			sleep(MENU_RETRY_WAIT_S);
			fast_fails = 0;
		}
	}
}
