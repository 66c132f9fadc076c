/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init, process 1 of nmbl's initramfs: what its steps share.  One
 * file a step, in the order main.c takes them: util.c (sentences, clocks,
 * nmbl's own command line), devices.c, watchdog.c, network.c, volumes.c,
 * menu.c, handover.c; helpers.c starts every other program.
 */
#ifndef NMBL_INIT_H
#define NMBL_INIT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libnmbl.h"
#include "macro.h"

#define RUN_DIR "/run/nmbl"
/* Where GRUB's EFI image would have been started from, for the menu's
 * $cmdpath. */
#define CMDPATH_ENV "NMBL_GRUB_CMDPATH"
/* The list of network cards the menu reads. */
#define NET_CARDS_ENV "NMBL_NET_CARDS"
/* Where efivarfs shows the firmware's variables. */
#define EFIVARS "/sys/firmware/efi/efivars"
/* How long the disk the firmware started nmbl from (or the network card)
 * may take to appear: udev's settle timeout, which nmbl's initramfs used
 * before. */
#define ESP_WAIT_SECONDS 30

/* util.c */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double since_boot(void);
long long now_ms(void);
char *kernel_param(struct nmbl_ctx *ctx, const char *key, bool as_written);
bool shell_allowed(struct nmbl_ctx *ctx);
unsigned seconds_param(struct nmbl_ctx *ctx, const char *name, unsigned default_s,
		       bool *ret_explicit);

/* devices.c */
void mount_api(void);
void open_console(void);
void restrict_sysrq(void);
int open_uevents(void);
void link_present_disks(struct nmbl_ctx *ctx);
void share_disks_with_menu(void);
void drain_uevents(struct nmbl_ctx *ctx, int fd);
char *esp_link(struct nmbl_ctx *ctx);
void wait_for_esp(struct nmbl_ctx *ctx, const char *link, int fd);
pid_t follow_uevents(struct nmbl_ctx *ctx, int fd);
void mount_firmware_fs(struct nmbl_ctx *ctx);

/* watchdog.c */
void arm_watchdog(struct nmbl_ctx *ctx);
void disarm_watchdog(void);

/* helpers.c */
int run(char *const argv[], int out_fd);
int run_helper(const char *name, char *const argv[], int (*contain)(void), bool network,
	       int out_fd, unsigned seconds, bool quiet);
int run_tool(char *const argv[], int out_fd);
void print_status(void);
void run_pre_menu(void);
void debug_shell(bool allowed);

/* network.c: true when the network is up. */
bool start_network(struct nmbl_ctx *ctx, int fd, const struct nmbl_network_boot *boot);
void stop_network(void);

/* volumes.c */
void set_up_volumes(struct nmbl_ctx *ctx);
void stop_volumes(void);

/* menu.c */
int run_menu(struct nmbl_ctx *ctx, bool network, struct nmbl_broker **ret_broker);

/* handover.c */
void remove_tree(int dfd, dev_t rootdev);
void switch_root(struct nmbl_ctx *ctx);

#endif
