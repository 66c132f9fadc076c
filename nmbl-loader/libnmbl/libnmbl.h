/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * libnmbl - boot a Linux kernel from Linux.
 *
 * Every function that can fail returns 0 or a positive count on success and
 * a negative errno on failure; out parameters are named ret_* and are left
 * untouched on failure.  The library never prints: it reports through the
 * context's log function, and the caller turns an error into one sentence
 * with nmbl_strerror().
 */
#ifndef LIBNMBL_H
#define LIBNMBL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nmbl_ctx;

/*
 * A context owns what nmbl did to the machine (mounts made) and where it
 * looks: ROOT prefixes /proc, /sys, /dev and /run so tests can point it at a
 * fixture tree.  NULL means "/".
 */
int nmbl_new(const char *root, struct nmbl_ctx **ret_ctx);
struct nmbl_ctx *nmbl_ref(struct nmbl_ctx *ctx);
struct nmbl_ctx *nmbl_unref(struct nmbl_ctx *ctx);

/* PRIORITY is a syslog priority (LOG_ERR ... LOG_DEBUG). */
typedef void (*nmbl_log_fn)(void *data, int priority, const char *file,
			    int line, const char *fn, const char *format,
			    va_list args);
void nmbl_set_log_fn(struct nmbl_ctx *ctx, nmbl_log_fn fn, void *data);
int nmbl_get_log_priority(const struct nmbl_ctx *ctx);
void nmbl_set_log_priority(struct nmbl_ctx *ctx, int priority);

/*
 * Mount read-only the partition of DISK (a block device node such as
 * "/dev/vda") that starts at sector START (512-byte units, 0 = the whole
 * disk), or reuse nmbl's earlier mount of it.  *ret_mountpoint is
 * malloc'ed; the mount lasts until nmbl_umount_all() or nmbl_exec().
 */
int nmbl_mount_partition(struct nmbl_ctx *ctx, const char *disk,
			 uint64_t start, char **ret_mountpoint);
int nmbl_umount_all(struct nmbl_ctx *ctx);
/*
 * Where GRUB's EFI image would start from on the ESP the firmware started
 * nmbl from (LoaderDevicePartUUID): the first of the N_DIRS directories
 * DIRS ("/EFI/fedora", ...) that holds a grub.cfg there.  *RET_DISK is the
 * ESP's disk ("/dev/vda"), *RET_PARTITION GRUB's name for the partition
 * on it ("gpt1", "msdos1"), both malloc'ed, *RET_DIR the directory, one of
 * DIRS.  -ENOENT when none holds one, or nmbl was not started from a
 * partition Linux shows; the ESP is left as it was found (unmounted).
 */
int nmbl_find_esp_grub_dir(struct nmbl_ctx *ctx, const char *const *dirs, size_t n_dirs,
			   char **ret_disk, char **ret_partition, const char **ret_dir);

/* What GRUB would assemble from the disks' members (nmbl_find_volume_members()). */
#define NMBL_VOLUMES_MD (1u << 0)  /* md RAID */
#define NMBL_VOLUMES_LVM (1u << 1) /* LVM physical volumes */
/*
 * Which kinds of volume the block devices present hold members of, or'ed
 * into *RET_KINDS, as libblkid finds their superblocks: what nmbl's init
 * is to assemble before the menu, so that a /boot on them can be read.
 */
int nmbl_find_volume_members(struct nmbl_ctx *ctx, unsigned *ret_kinds);
/*
 * Write to F a grub-emu device map line for each running md array and
 * each LVM logical volume the kernel has, named as GRUB's diskfilter
 * names them: (md/NAME) and (mduuid/UUID), (lvm/VG-LV) and
 * (lvmid/VGUUID/LVUUID).  Returns how many devices it named.
 */
int nmbl_write_volume_map(struct nmbl_ctx *ctx, FILE *f);

/*
 * Load the kernel modules ALIAS names ("fs-ext4", "ext4", a device's
 * modalias) with their dependencies, as modprobe would, from the running
 * kernel's /lib/modules below the context's root; blacklisted modules are
 * left out.  -ENOENT when no module matches.
 */
int nmbl_load_module(struct nmbl_ctx *ctx, const char *alias);
/*
 * Load the modules of the devices already present on the buses disks and
 * keyboards hang off (PCI, virtio, USB, SCSI, HID, MMC, platform, ACPI).
 * Returns how many devices got a module.
 */
int nmbl_coldplug(struct nmbl_ctx *ctx);
/*
 * Act on one kernel uevent (a NETLINK_KOBJECT_UEVENT message of LEN
 * bytes) as udev would in a boot menu: an added device gets its module,
 * an added block device its /dev/disk/by-* links.  -EBADMSG for a
 * message that is no uevent.
 */
int nmbl_handle_uevent(struct nmbl_ctx *ctx, const void *msg, size_t len);
/* A kernel uevent is at most a page (the kernel's UEVENT_BUFFER_SIZE is
 * 2048 bytes of variables after the "ACTION@DEVPATH" header): a buffer
 * this big receives any. */
#define NMBL_UEVENT_MAX 4096
/*
 * Make the /dev/disk/by-uuid, by-label, by-partuuid and by-partlabel links
 * of block device NAME ("vda2") below the context's root, named as udev
 * names them, from what libblkid finds on it.
 */
int nmbl_link_block_device(struct nmbl_ctx *ctx, const char *name);

/*
 * Load KERNEL with N_INITRDS initrds (concatenated in order, each padded
 * to 4 bytes as GRUB does) and CMDLINE through kexec_file_load(2), which
 * checks the kernel's signature when the running kernel requires it.
 * A UKI is split as systemd-stub would: its .linux is the kernel, its
 * .ucode and .initrd come before the initrds given, and its .cmdline is
 * used unless Secure Boot is off and CMDLINE is not empty.  -E2BIG when
 * the command line is longer than the kernel takes.
 */
int nmbl_load(struct nmbl_ctx *ctx, const char *kernel,
	      const char *const *initrds, size_t n_initrds,
	      const char *cmdline);
int nmbl_unload(struct nmbl_ctx *ctx);

/*
 * Measured boot, for a boot loader that asks for it (nmbl_set_measure();
 * off in a new context, so that a program that only loads a kernel, such
 * as nmbl(8) on an installed system, extends nothing).  With a TPM 2.0,
 * libnmbl extends PCRs as GRUB does on EFI (EV_IPL events, every allocated bank) and appends each event to
 * systemd's userspace measurement log, NMBL_TPM_LOG, and to a binary TCG
 * event log, NMBL_TPM_EVENT_LOG, which starts as a copy of the firmware's:
 * both replay to the PCRs.  nmbl_load() and nmbl_check() measure into
 * PCR 9 the kernel (and nmbl_load() each initrd) they have not been given
 * measured, from the very bytes they load; the hand-overs (nmbl_exec(),
 * nmbl_switch_root()) extend PCR 11 with NMBL_PHASE_KEXEC or
 * NMBL_PHASE_DIRECT ("leave-nmbl:..."), so that a secret sealed to nmbl's
 * own PCR 11 stays sealed in whatever nmbl boots.  A kexec'd kernel finds
 * the logs in its initramfs, below /.extra/nmbl/.  Without a TPM nothing
 * is measured; with one that cannot be reached or refuses an extension,
 * these calls fail and nothing is booted.
 */
void nmbl_set_measure(struct nmbl_ctx *ctx, bool measure);
#define NMBL_PCR_GRUB_STRINGS 8
#define NMBL_PCR_GRUB_FILES 9
#define NMBL_PCR_KERNEL_BOOT 11
#define NMBL_TPM_LOG "/run/log/systemd/tpm2-measure.log"
#define NMBL_TPM_EVENT_LOG "/run/log/nmbl/tpm2-event-log.bin"
#define NMBL_PHASE_KEXEC "leave-nmbl:kexec"
#define NMBL_PHASE_DIRECT "leave-nmbl:direct"
/* 1 with a TPM 2.0 to measure into, 0 without one (or with a TPM 1.2);
 * -EUNATCH when the firmware announces a TPM 2.0 Linux cannot reach,
 * -EPROTONOSUPPORT when it has a bank nmbl cannot hash.  A measurement
 * the TPM does not take, and any after it, is -EBADE. */
int nmbl_tpm_present(struct nmbl_ctx *ctx);
/* GRUB's grub_tpm_measure(): the digest of DATA into PCR (0-23), logged
 * as DESCRIPTION ("grub_cmd: ...") and its NUL. */
int nmbl_measure(struct nmbl_ctx *ctx, unsigned pcr, const void *data, size_t len,
		 const char *description);
/*
 * The kernel, or an initrd, at PATH, measured now into PCR 9 as the file
 * GRUB calls NAME ("/vmlinuz-6.1", "(hd0,gpt2)/initrd.img"), in the order
 * GRUB's linux and initrd commands measure them, and held: nmbl_load(),
 * nmbl_check() and nmbl_choose_boot() of the same PATH take the bytes
 * measured.  nmbl_measure_kernel() drops the initrds held before it, as
 * GRUB's linux command does.
 */
int nmbl_measure_kernel(struct nmbl_ctx *ctx, const char *path, const char *name);
int nmbl_measure_initrd(struct nmbl_ctx *ctx, const char *path, const char *name);

/*
 * The contained menu.  grub-emu parses what the disks hold with GRUB's
 * file system drivers, so it runs without root's powers:
 * nmbl_contain_menu(), called by the program that starts it, between fork
 * and exec, makes the process NMBL_MENU_UID/NMBL_MENU_GID ("nmbl-menu")
 * with no capabilities, none to gain (no_new_privs, an empty bounding
 * set), and a seccomp filter that refuses with EPERM the calls listed in
 * nmbl-init(8) (kexec, reboot, mount, modules, keyrings, BPF, ptrace,
 * perf, namespaces, io_uring, ...) and every socket but a local one
 * (AF_UNIX: no network, even on a network boot), and kills a call made
 * through another architecture's entry.  It reads the disks (nmbl's init makes their
 * nodes readable to its group), and asks nmbl's init, the broker, for
 * whatever needs root, one request per SOCK_SEQPACKET datagram on the
 * socket whose descriptor NMBL_BROKER_FD_ENV names.  Each request is
 * checked before it is done; what it carries:
 *
 *   MEASURE          PCR (8 or 9), description; the data in a file sent
 *                    along (SCM_RIGHTS): GRUB's own measurements, but
 *                    never a "kernel_cmdline: " (the broker's own)
 *   KERNEL           disk ("/dev/vda"), start sector of the partition (0:
 *                    the whole disk), path on it, GRUB's name for it, the
 *                    command line GRUB's linux made ("BOOT_IMAGE=..."):
 *                    the partition is mounted read-only, the file opened
 *                    inside it, measured into PCR 9, the line into PCR 8
 *                    as GRUB words it, both held for BOOT
 *   INITRD           the same but the line, and its position in its initrd
 *                    command (0 starts the list again)
 *   BOOT             the entry's menu id: the kernel held is checked
 *                    (direct boot) or loaded (kexec) with the line held,
 *                    the hand-over prepared; the menu then exits
 *                    NMBL_EXIT_SWITCH_ROOT or NMBL_EXIT_KEXEC as the reply
 *                    says, and the entry is recorded (LoaderEntrySelected)
 *                    once nmbl's init keeps the hand-over
 *   CHAINLOAD        disk, start sector, path of an EFI program: BootNext
 *                    (nmbl_set_boot_next())
 *   FIRMWARE_SETUP   OsIndications; after either, the menu exits
 *                    NMBL_EXIT_REBOOT
 *   ENTRY_REQUESTS   the Boot Loader Interface's one-shot entry (taken)
 *                    and default entry
 *   MENU_SHOWN       the watchdog is stopped
 *   FETCH            a URL (tftp://, http://, https://; NMBL_URL_MAX): the
 *                    file, read by nmbl_fetch() when nmbl was started from
 *                    the network (nmbl_broker_set_network(); else
 *                    -ENETUNREACH), sent back sealed (SCM_RIGHTS); on
 *                    failure the helper's sentence.  While it comes the
 *                    broker sends PROGRESS messages (done, total bytes)
 *                    instead of the reply, and the menu may send CANCEL
 *                    (never answered): the reply is then -ECANCELED
 *   KERNEL_URL       a URL, GRUB's name for it, the command line: as
 *                    KERNEL, the file fetched and held in memory; a kernel
 *                    from the network always boots by kexec
 *   INITRD_URL       a URL, GRUB's name, its position: as INITRD
 *   GRUBENV_WRITE    disk, start sector, path of a GRUB environment block
 *                    file; the new block sent along: written over the
 *                    file's own blocks, as GRUB's save_env writes, only
 *                    when the file and the new block both are one, of
 *                    the same size, on a file system whose blocks Linux
 *                    maps (ext2/3/4, FAT, XFS)
 *
 * nmbl_broker_call() is the menu's side: the result (0 or more, or the
 * broker's negative errno; -ECONNRESET when the broker is gone), and in
 * RET_REPLY (N_REPLY strings, each malloc'ed or NULL) what the reply
 * carries: BOOT "kexec" or "direct" and why kexec (or ""); on failure
 * "load" or "root" (what failed) and an explanation for a person;
 * CHAINLOAD the option's number ("0004"); ENTRY_REQUESTS the one-shot and
 * the default entry, the result's bits 1 and 2 saying which there are.
 * One hand-over a session: once BOOT, CHAINLOAD or FIRMWARE_SETUP has
 * prepared one, every request is refused (-EALREADY).
 */
#define NMBL_MENU_UID 65533
#define NMBL_MENU_GID 65533
#define NMBL_MENU_USER "nmbl-menu"
int nmbl_contain_menu(void);
/* The same for the helper that fetches a network boot's files for the
 * broker (nmbl_fetch()), but as a user and group of its own,
 * NMBL_FETCH_UID/NMBL_FETCH_GID ("nmbl-fetch"), which reads no disk, and
 * for its sockets: IP's and netlink's too. */
#define NMBL_FETCH_UID 65530
#define NMBL_FETCH_GID 65530
int nmbl_contain_fetcher(void);
/*
 * For a distribution's tool that nmbl's init runs on what the disks hold,
 * before the menu (mdadm, LVM's tool: a /boot on md RAID or in LVM),
 * between fork and exec: of root's capabilities only those that set up md
 * arrays and device-mapper volumes and make their nodes (CAP_SYS_ADMIN,
 * CAP_MKNOD, CAP_CHOWN, CAP_IPC_LOCK), none to gain; still uid 0, which
 * mdadm demands; a mount namespace of its own in which the image's root is
 * read-only, and so are the kernel's settings (/proc/sys, /sys/kernel,
 * /sys/module but md's new_array), the firmware's variables are absent,
 * every character device but the harmless ones (null, zero, random,
 * device-mapper's control) is /dev/null, and /tmp is its own; the filter,
 * which lets it make the nodes of md arrays and device-mapper volumes
 * only, and no socket but local and netlink ones: a disk that takes such
 * a tool over gets less than root.
 */
int nmbl_contain_tool(void);
/*
 * For the DHCP client that nmbl's init runs on a network boot (dhcpcd,
 * which parses what the network sends), between fork and exec: user and
 * group NMBL_NET_UID/NMBL_NET_GID ("nmbl-net"), not root, keeping only
 * CAP_NET_ADMIN, CAP_NET_RAW and CAP_NET_BIND_SERVICE (ambient, so that
 * they outlive exec; none to gain), the menu's filter but with IP,
 * netlink and raw Ethernet sockets, and a mount namespace without the
 * firmware's variables.  Where it keeps its lease and its run-time files
 * must be that user's.
 */
#define NMBL_NET_UID 65532
#define NMBL_NET_GID 65532
int nmbl_contain_dhcp(void);
/*
 * The one way nmbl starts a program that reads untrusted bytes (the menu,
 * the disk tools, the DHCP client, the fetcher): nmbl_spawn() starts
 * ARGV[0] (a full path) with ARGV as the first process of PID and IPC
 * namespaces of its own, and of an empty network namespace unless
 * NETWORK, so that when it ends, or is ended, every process it started
 * ends too, whatever session it put itself in.  It gets FD[0..2] as its
 * standard input, output and error (-1: /dev/null; without an input it
 * is in a session of its own) and PASS_FD, when not -1, as descriptor 3,
 * no other descriptor of the caller's (the console, the watchdog), every
 * signal at its default, ENV ("NAME=VALUE", or NULL) in its environment
 * and NMBL_WATCHDOG_FD not, and CONTAIN (nmbl_contain_*(), or NULL) run
 * between fork and exec; when CONTAIN fails it does not run.  Its pid,
 * and in *RET_PIDFD a descriptor that polls readable once it and all it
 * started have ended (-1 where the kernel has no pidfds), or -errno.
 * nmbl_spawn_wait() reaps it: its exit status, 128 + the signal that
 * ended it, -ETIMEDOUT when TIMEOUT_S (0: none) passed first and it was
 * ended, or -errno.
 */
struct nmbl_spawn_options {
	int (*contain)(void);
	int fd[3];
	int pass_fd;
	bool network;
	const char *env;
};
pid_t nmbl_spawn(char *const argv[], const struct nmbl_spawn_options *options, int *ret_pidfd);
int nmbl_spawn_wait(pid_t pid, int pidfd, unsigned timeout_s);
/*
 * A file such a helper wrote (dhcpcd's lease), read as what it is, the
 * work of a program taken over: PATH whole into *RET (malloc'ed,
 * NUL-terminated) and *RET_LEN, only when it is a regular file of OWNER's
 * of at most MAX bytes, opened without following a link (-ELOOP) and
 * without blocking; -EPERM for anything else, or anyone else's, -EFBIG
 * when it is larger.
 */
int nmbl_read_helper_file(const char *path, uid_t owner, size_t max, char **ret,
			  size_t *ret_len);
/* For tests of the filter, from inside the contained process: each denied
 * call tried with arguments that would do nothing, and REPORT given its
 * name and errno (0: the call went through).  The number of calls tried. */
int nmbl_contain_probe(void (*report)(void *data, const char *call, int err), void *data);

/*
 * A network boot's files.  nmbl_fetch() reads URL (tftp://, http://,
 * https://) with the helper nmbl-fetch (libcurl; nmbl_contain_fetcher()
 * when OPTIONS says so) into a sealed memory file, *RET_FD, at its start.
 * OPTIONS (NULL: the defaults) bounds it: at most MAX_SIZE bytes,
 * TIMEOUT_S seconds in all, STALL_S seconds without a byte; HTTPS trusts
 * CA_FILE's certificates only (none: HTTPS is refused).  PROGRESS, when
 * set, is called with the bytes so far and the total (0 while unknown)
 * at least every fifth of a second, and once more when the file is
 * whole; a negative return ends the fetch (-ECANCELED).  -ENOENT when the
 * server has no such file, -ETIMEDOUT, -ECANCELED, or -EIO with the
 * helper's sentence in *RET_ERROR (malloc'ed, when not NULL).
 *
 * nmbl-fetch's exit status says the same: NMBL_FETCH_NOT_FOUND,
 * NMBL_FETCH_FAILED (a sentence on its standard error), NMBL_FETCH_USAGE.
 */
#define NMBL_FETCH_FAILED 1
#define NMBL_FETCH_USAGE 2
#define NMBL_FETCH_NOT_FOUND 3
#define NMBL_FETCH_MAX_DEFAULT (1024ULL * 1024 * 1024)
#define NMBL_FETCH_TIMEOUT_DEFAULT 900
#define NMBL_FETCH_STALL_DEFAULT 15
struct nmbl_fetch_options {
	uint64_t max_size;
	unsigned timeout_s;
	unsigned stall_s;
	const char *ca_file;
	bool contain;
	int (*progress)(void *data, uint64_t done, uint64_t total);
	void *data;
};
int nmbl_fetch(struct nmbl_ctx *ctx, const char *url, const struct nmbl_fetch_options *options,
	       int *ret_fd, char **ret_error);

#define NMBL_BROKER_FD_ENV "NMBL_BROKER_FD"
#define NMBL_BROKER_MESSAGE_MAX (128 * 1024)
#define NMBL_BROKER_FIELDS_MAX 8
enum nmbl_broker_request {
	NMBL_BROKER_MEASURE = 1,
	NMBL_BROKER_KERNEL,
	NMBL_BROKER_INITRD,
	NMBL_BROKER_BOOT,
	NMBL_BROKER_CHAINLOAD,
	NMBL_BROKER_FIRMWARE_SETUP,
	NMBL_BROKER_ENTRY_REQUESTS,
	NMBL_BROKER_MENU_SHOWN,
	NMBL_BROKER_GRUBENV_WRITE,
	NMBL_BROKER_FETCH,
	NMBL_BROKER_KERNEL_URL,
	NMBL_BROKER_INITRD_URL,
	NMBL_BROKER_CANCEL,
};
/* The header word of the broker's progress messages, which no result is. */
#define NMBL_BROKER_PROGRESS 0x676f7270u
#define NMBL_URL_MAX 2048
int nmbl_broker_call(int fd, enum nmbl_broker_request request, const char *const *fields,
		     size_t n_fields, int data_fd, char **ret_reply, size_t n_reply);
/* The same, for FETCH and the URL requests: PROGRESS hears the broker's
 * progress messages (a negative return sends CANCEL), *RET_FD (may be
 * NULL) is the descriptor the reply carried, or -1. */
int nmbl_broker_call_full(int fd, enum nmbl_broker_request request, const char *const *fields,
			  size_t n_fields, int data_fd,
			  int (*progress)(void *data, uint64_t done, uint64_t total),
			  void *progress_data, int *ret_fd, char **ret_reply, size_t n_reply);

/*
 * The broker's side, in nmbl's init: serves the menu on FD with CTX (which
 * it measures with, nmbl_set_measure()).  nmbl_broker_serve() answers one
 * request: 1, or 0 when the menu has closed its side, or -errno when the
 * socket fails.  A request that is malformed or not allowed is refused
 * in its reply, never done.  Once the menu has ended, what the broker
 * prepared, if it agrees with the menu's exit status, is the caller's to
 * carry out: NMBL_BROKER_KEXEC, nmbl_exec(); NMBL_BROKER_DIRECT, switch
 * root to NMBL_SYSROOT; NMBL_BROKER_REBOOT, reboot; otherwise
 * nmbl_broker_free() undoes what was prepared (the kernel loaded, the
 * root mounted and the command line bound for a direct boot, the mounts).
 */
struct nmbl_broker;
enum nmbl_broker_outcome {
	NMBL_BROKER_NOTHING,
	NMBL_BROKER_KEXEC,
	NMBL_BROKER_DIRECT,
	NMBL_BROKER_REBOOT,
};
int nmbl_broker_new(struct nmbl_ctx *ctx, int fd, struct nmbl_broker **ret);
struct nmbl_broker *nmbl_broker_free(struct nmbl_broker *broker);
int nmbl_broker_serve(struct nmbl_broker *broker);
/* nmbl was started from the network: FETCH and the URL requests read it
 * with OPTIONS (their progress function is the broker's own). */
int nmbl_broker_set_network(struct nmbl_broker *broker, const struct nmbl_fetch_options *options);
enum nmbl_broker_outcome nmbl_broker_get_outcome(const struct nmbl_broker *broker);
/* Prepared, and kept by nmbl_broker_free(): the caller now boots it.  For
 * a kernel booted, the Boot Loader Interface's record of it is written
 * now (nmbl_set_loader_entry()): 0, or its error, which need not stop
 * the boot. */
int nmbl_broker_keep(struct nmbl_broker *broker);
/*
 * Whether nmbl_load() of KERNEL with CMDLINE would be accepted: the same
 * checks by the running kernel (the image's format, its signature against
 * the keys trusted for kexec when Secure Boot or the kernel requires one,
 * the command line's length), without loading it.  For a direct boot,
 * which needs the kernel's verdict but never its copy.  0, or the error
 * nmbl_load() would return (nmbl_explain_refusal() explains it);
 * -ENOEXEC for a file that is no PE image.  Fails closed: only an answer
 * the kernel gives after its signature check counts as accepted.  The
 * file is opened once: the bytes nmbl_switch_root() finds to be the
 * running kernel are the bytes the kernel checked.
 */
int nmbl_check(struct nmbl_ctx *ctx, const char *kernel, const char *cmdline);

/*
 * Boot the loaded kernel: through systemd when it runs as PID 1 (as
 * "systemctl kexec" does), otherwise sync, unmount nmbl's mounts and
 * reboot(LINUX_REBOOT_CMD_KEXEC).  Returns only on failure.
 */
int nmbl_exec(struct nmbl_ctx *ctx);
/* Restart through the firmware, the same way.  Returns only on failure. */
int nmbl_reboot(struct nmbl_ctx *ctx);

/*
 * Direct boot.  How to boot KERNEL with CMDLINE (an entry's, as given to
 * nmbl_load()): NMBL_BOOT_DIRECT when KERNEL is the running kernel, the
 * kernel parameters of CMDLINE are the running kernel's (those userspace
 * reads may differ; so may quiet, loglevel= and debug, set at run time),
 * and the root it names is either a local file system nmbl mounts itself,
 * or a stack of local disks (LVM, LUKS, md RAID) that the entry's own
 * initrd sets up: then that initrd, as measured by nmbl_measure_initrd(),
 * does it on the running kernel (nmbl_switch_root()).  Otherwise (a
 * network root, a hibernated system, no initrd) NMBL_BOOT_KEXEC, and
 * *RET_REASON (malloc'ed) says why in words that follow "kexec, because
 * ...".  nmbl.boot=kexec on the running kernel's command line asks for
 * kexec always.
 */
enum nmbl_boot_method {
	NMBL_BOOT_KEXEC,
	NMBL_BOOT_DIRECT,
};
int nmbl_choose_boot(struct nmbl_ctx *ctx, const char *kernel, const char *cmdline,
		     enum nmbl_boot_method *ret_method, char **ret_reason);
/*
 * Boot the running kernel again without booting it: after nmbl_check() (or
 * nmbl_load()) of the entry's kernel succeeded, mount the root CMDLINE
 * names (root= as UUID=, LABEL=, PARTUUID=, PARTLABEL= or /dev/...,
 * rootfstype=, rootflags=, ro/rw) on /sysroot, check that it has
 * the init to start, show CMDLINE in /proc/cmdline, set the console log
 * level it asks for, unload any kernel and unmount everything nmbl
 * mounted.  When nmbl_choose_boot() chose the entry's initrd to set up
 * its root, unpack that initrd into a tmpfs on /sysroot instead, as the
 * kernel would unpack it, and make CMDLINE what it reads as the kernel's
 * command line.  Then switch root: with systemd as PID 1 through
 * "systemctl switch-root", returning only on failure; otherwise return 0,
 * and the initramfs's init switches root to /sysroot once the caller has
 * exited, and starts nmbl_switch_root_init() there.
 * -ENXIO: no such root device; -ENOMEDIUM: no init on it; -ENOENT: no
 * kernel was accepted first, or the accepted one is not the running
 * kernel; -EBUSY: the root's device is still mounted (the new mount would
 * share that mount's options); for an initrd: -EBADMSG, it is malformed
 * or truncated, -ENOPKG, it holds no modules of the running kernel (the
 * entry's own kernel, loaded by nmbl_load(), can boot it).  Every mount nmbl made is
 * unmounted before the root is mounted.  On failure nothing is left
 * mounted.
 */
int nmbl_switch_root(struct nmbl_ctx *ctx, const char *cmdline);
/*
 * The program to start in /sysroot once nmbl_switch_root() returned 0: the
 * entry's init= (or /sbin/init) on its root, or its initrd's rdinit= (or
 * /init); *RET_INITRD (unless NULL) true for an initrd, which mounts /dev,
 * /proc, /sys and /run itself.  NULL when nothing is prepared.
 */
const char *nmbl_switch_root_init(const struct nmbl_ctx *ctx, bool *ret_initrd);
/* Where nmbl_switch_root() mounts the root, as dracut's init names it. */
#define NMBL_SYSROOT "/sysroot"
/*
 * The menu's exit status, which the initramfs's init acts on (see
 * nmbl-init(8)): NMBL_EXIT_REBOOT, the menu ended (GRUB's reboot, halt or
 * exit), so restart the machine; NMBL_EXIT_SWITCH_ROOT, nmbl_switch_root()
 * returned 0 without systemd, so switch root to NMBL_SYSROOT and start the
 * init the entry's command line names.  Any other status, a signal or a
 * crash is a failure of the menu itself.  A contained menu exits
 * NMBL_EXIT_SWITCH_ROOT or NMBL_EXIT_KEXEC after its broker prepared that
 * boot (nmbl_broker_get_outcome()), and nmbl's init does it.
 */
#define NMBL_EXIT_REBOOT 0
#define NMBL_EXIT_SWITCH_ROOT 100
#define NMBL_EXIT_KEXEC 101
/*
 * nmbl_cmdline_*() split CMDLINE as the kernel does, at most 64 KiB of it
 * (-E2BIG beyond; the kernel's own limit is far less), and return -EINVAL
 * for a NULL argument and -ENOMEM when out of memory.
 *
 * The value of KEY on the command line CMDLINE (the last one, quotes
 * removed, "" for a bare KEY), malloc'ed; -ENOENT when absent.
 */
int nmbl_cmdline_get_value(const char *cmdline, const char *key, char **ret);
/* The same parameter as written ("KEY", "KEY=VALUE", quotes kept), for a
 * caller that must tell "KEY" from "KEY=" or "KEY=\"1\"" from "KEY=1". */
int nmbl_cmdline_get_param(const char *cmdline, const char *key, char **ret);
/* CMDLINE without the parameters named KEY, the others as written and
 * separated by one space, malloc'ed: the running kernel's command line
 * for another kernel, less the BOOT_IMAGE= its boot loader added. */
int nmbl_cmdline_remove(const char *cmdline, const char *key, char **ret);
/* The running kernel's command line (/proc/cmdline below the context's
 * root), without its trailing newline, malloc'ed.  -EFBIG when it is over
 * 64 KiB, -EINVAL for a NULL argument, -ENOMEM, or open(2)'s and read(2)'s
 * errors (-ENOENT without /proc mounted below the root). */
int nmbl_get_kernel_cmdline(struct nmbl_ctx *ctx, char **ret_cmdline);

enum nmbl_lockdown {
	NMBL_LOCKDOWN_NONE,
	NMBL_LOCKDOWN_INTEGRITY,
	NMBL_LOCKDOWN_CONFIDENTIALITY,
};
int nmbl_get_lockdown(struct nmbl_ctx *ctx, enum nmbl_lockdown *ret);
const char *nmbl_lockdown_to_string(enum nmbl_lockdown lockdown);

/*
 * A kernel image, a UKI or another EFI program, parsed (bounds-checked)
 * from a file.  -ENOEXEC when the file is not a PE image at all.
 */
struct nmbl_image;
enum nmbl_image_type {
	NMBL_IMAGE_LINUX, /* a Linux kernel with its EFI stub (bzImage) */
	NMBL_IMAGE_UKI,   /* a Unified Kernel Image: stub + .linux + ... */
	NMBL_IMAGE_EFI,   /* any other EFI program */
};
int nmbl_image_new_from_file(struct nmbl_ctx *ctx, const char *path,
			     struct nmbl_image **ret);
struct nmbl_image *nmbl_image_ref(struct nmbl_image *img);
struct nmbl_image *nmbl_image_unref(struct nmbl_image *img);
enum nmbl_image_type nmbl_image_get_type(const struct nmbl_image *img);
const char *nmbl_image_type_to_string(enum nmbl_image_type type);
/* The kernel's version string ("6.1.0-57-amd64 (...) #1 SMP ..."), or NULL. */
const char *nmbl_image_get_version(const struct nmbl_image *img);
/*
 * 1 when IMG is the running kernel, by the identity its version string
 * shares with /proc/version (release, builder, build number and date),
 * never by file name; 0 when it is another.  -ENODATA when the image
 * carries no version string.
 */
int nmbl_image_is_running_kernel(struct nmbl_ctx *ctx, const struct nmbl_image *img);
/* The longest command line the kernel takes, without the NUL; 0 unknown. */
size_t nmbl_image_get_cmdline_max(const struct nmbl_image *img);
/* Whether a section or the signature lies past the end of the file. */
bool nmbl_image_get_truncated(const struct nmbl_image *img);
/* Whether the image carries Authenticode signatures. */
bool nmbl_image_get_signed(const struct nmbl_image *img);
/*
 * Who signed the kernel kexec checks (the image itself, or a UKI's
 * .linux): the name of each signer of each Authenticode signature, in
 * order, as people call it (its certificate's CN, else its O).
 * *RET_SIGNERS is NULL-terminated and one allocation, its strings
 * included: free() it.  Returns the count; -EBADMSG for a malformed
 * signature.
 */
int nmbl_image_get_signers(const struct nmbl_image *img, char ***ret_signers);
/*
 * Whether the keys the running kernel checks kexec_file_load(2) against
 * (.builtin_trusted_keys, .secondary_trusted_keys, .machine, .platform)
 * trust the kernel of IMG: 1 when a signer of its first signature (the
 * one kexec reads) chains, through the certificates the signature
 * carries, to one of those keys, found as the kernel finds it, by subject
 * or authority key identifier; *RET_KEY (may be NULL) is then that key's
 * description ("Debian Secure Boot CA: 6ccece7e..."), malloc'ed.  0 when
 * none does (unsigned, malformed, or signed by keys these do not hold).
 * -ENOENT when /proc/keys shows none of those keyrings (another user than
 * root cannot see them), or the error of a keyring that could not be
 * read: nobody can tell.  The image's digest is the kernel's to check when
 * it loads the image.
 */
int nmbl_image_is_trusted(struct nmbl_ctx *ctx, const struct nmbl_image *img,
			  char **ret_key);
size_t nmbl_image_get_n_sections(const struct nmbl_image *img);
int nmbl_image_get_section(const struct nmbl_image *img, size_t i,
			   char ret_name[9], uint64_t *ret_size);
/*
 * Whether the firmware, under Secure Boot, would start IMG (the file as a
 * whole: for a UKI its own signature, not its kernel's), by the rules of
 * EDK2's image verification: its Authenticode hash, its signatures, the
 * firmware's db and dbx (EFI variables below the context's root).  0 when
 * db allows it: a signer chains, through the certificates its signature
 * carries, to a certificate of db (validity times and key usage are not
 * checked, as firmware does not), or db lists the image's hash; then
 * *RET_SIGNER (may be NULL) is that signer's name (its CN), malloc'ed, or
 * NULL when the hash let it in.  -EKEYREJECTED: signed, but by nobody db
 * trusts, or not matching its contents, or revoked by dbx (the image's
 * hash, a certificate, or a certificate's TBS hash whatever its revocation
 * time).  -ENODATA: not signed (no signature the firmware reads), and db
 * does not list its hash.  -ENOENT: there is no db (no EFI, or Secure
 * Boot never set up): the caller decides.  -EBADMSG: the headers,
 * sections, security directory or a signature are malformed, or db or dbx
 * is.  Whether Secure Boot is on is the caller's to ask; with shim, the
 * firmware checks shim, and shim checks the image (db, MokList, its own
 * certificate).
 */
int nmbl_image_check_firmware(struct nmbl_ctx *ctx, const struct nmbl_image *img,
			      char **ret_signer);
/*
 * Whether shim would start IMG, which the firmware did not: as
 * nmbl_image_check_firmware(), against db and shim's MokListRT (shim's own
 * certificate and the Machine Owner Keys, as shim hands them to the OS),
 * revoked by dbx or MokListXRT.  -ENOENT when no MokListRT is set: shim did
 * not start this boot, and only shim could tell.  shim's SBAT check is not
 * made here.
 */
int nmbl_image_check_shim(struct nmbl_ctx *ctx, const struct nmbl_image *img,
			  char **ret_signer);

/* 1 enabled, 0 disabled; -ENOENT when the machine did not boot with EFI. */
int nmbl_get_secure_boot(struct nmbl_ctx *ctx);
/* 1 when the firmware has no platform key (anyone may enroll keys). */
int nmbl_get_setup_mode(struct nmbl_ctx *ctx);

/* 1 when the firmware can be asked to show its setup at the next boot
 * (OsIndicationsSupported), 0 when not or without EFI. */
int nmbl_get_firmware_setup_supported(struct nmbl_ctx *ctx);
/* Ask it to (OsIndications); the caller reboots.  -EOPNOTSUPP when it
 * cannot. */
int nmbl_set_boot_to_firmware_setup(struct nmbl_ctx *ctx);

/* 1 when a kernel is loaded for kexec, 0 when not. */
int nmbl_get_kexec_loaded(struct nmbl_ctx *ctx);

/*
 * Why the running kernel refused KERNEL when nmbl_load() returned ERR:
 * who signed it (or that nobody did, or that it is truncated), which keys
 * the running kernel trusts for kexec, and how to fix it.  Several lines
 * of text for a person, malloc'ed; complements nmbl_strerror().
 */
int nmbl_explain_refusal(struct nmbl_ctx *ctx, const char *kernel, int err,
			 char **ret);

/*
 * Boot Loader Interface: record that nmbl (LoaderInfo, LoaderFeatures)
 * booted ENTRY (its menu id; LoaderEntrySelected), and when it started and
 * handed over (LoaderTimeInitUSec, LoaderTimeExecUSec), for bootctl and
 * systemd-analyze in the booted system.  After ExitBootServices a volatile
 * variable cannot be created, so these are written non-volatile, each
 * only when it changes.
 */
int nmbl_set_loader_entry(struct nmbl_ctx *ctx, const char *entry);
/*
 * The entries the booted system asked for: LoaderEntryOneShot (deleted as
 * it is read, as systemd-boot does, so it applies once) and
 * LoaderEntryDefault (bootctl set-oneshot / set-default), each a
 * case-insensitive glob over entry ids, malloc'ed; NULL when not set.
 */
int nmbl_take_loader_entry_requests(struct nmbl_ctx *ctx, char **ret_oneshot,
				    char **ret_default);
/*
 * The unique GUID of the partition the firmware started nmbl's image from
 * (LoaderDevicePartUUID, set by systemd-stub), in lower case as Linux and
 * udev's /dev/disk/by-partuuid links spell it, malloc'ed.  -ENOENT when
 * the firmware did not say, -EBADMSG when it is no GUID.
 */
int nmbl_get_loader_device_partuuid(struct nmbl_ctx *ctx, char **ret_partuuid);

/*
 * An EFI load option: the value of a Boot#### variable, decoded with every
 * length checked (-EBADMSG when malformed).  The device path is in UEFI's
 * text form ("HD(1,GPT,<GUID>,0x800,0x32000)/\\EFI\\BOOT\\BOOTX64.EFI");
 * the partition UUID (lower case, as Linux shows it) and the file come from
 * its first instance, NULL when it has none.
 */
struct nmbl_load_option;
int nmbl_load_option_parse(const void *buf, size_t len,
			   struct nmbl_load_option **ret);
struct nmbl_load_option *nmbl_load_option_free(struct nmbl_load_option *opt);
uint32_t nmbl_load_option_get_attributes(const struct nmbl_load_option *opt);
const char *nmbl_load_option_get_description(const struct nmbl_load_option *opt);
const char *nmbl_load_option_get_device_path(const struct nmbl_load_option *opt);
const char *nmbl_load_option_get_partuuid(const struct nmbl_load_option *opt);
const char *nmbl_load_option_get_file(const struct nmbl_load_option *opt);
size_t nmbl_load_option_get_optional_data(const struct nmbl_load_option *opt,
					  const void **ret);
/*
 * A network boot's option (PXE, HTTP Boot), from its first instance: the
 * card's Ethernet address (false when the path names none), the IP
 * version it booted over (4, 6, 0 when none), its VLAN (-1 when none),
 * and HTTP Boot's URL (NULL when none or empty, as in the options firmware
 * makes, whose URL only the loaded image's path has).
 */
bool nmbl_load_option_get_mac(const struct nmbl_load_option *opt, unsigned char ret[6]);
unsigned nmbl_load_option_get_ip_version(const struct nmbl_load_option *opt);
int nmbl_load_option_get_vlan(const struct nmbl_load_option *opt);
const char *nmbl_load_option_get_uri(const struct nmbl_load_option *opt);
/*
 * Whether the firmware started nmbl from the network: no partition in
 * LoaderDevicePartUUID, and the Boot#### option BootCurrent names holds a
 * card's address (MAC()).  *RET (nmbl_network_boot_free()) says which
 * card, over which IP version (0: the path does not say), on which VLAN
 * (-1: none), and HTTP Boot's URL when the option has one.  -ENOENT when
 * nmbl was not started from the network.
 */
struct nmbl_network_boot {
	unsigned char mac[6];
	unsigned ip_version;
	int vlan;
	char *uri;
};
int nmbl_get_network_boot(struct nmbl_ctx *ctx, struct nmbl_network_boot **ret);
struct nmbl_network_boot *nmbl_network_boot_free(struct nmbl_network_boot *boot);
/* The network interface ("eth0") of the card with address MAC, malloc'ed;
 * -ENODEV while the kernel shows none. */
int nmbl_find_network_interface(struct nmbl_ctx *ctx, const unsigned char mac[6], char **ret);
/* The machine's Ethernet cards as Linux shows them (bus devices: not lo,
 * bridges, VLANs, tunnels), in the order of their names: *RET (free()) of
 * *RET_N, none when there are none. */
struct nmbl_network_card {
	char ifname[16];
	unsigned char mac[6];
};
int nmbl_list_network_cards(struct nmbl_ctx *ctx, struct nmbl_network_card **ret,
			    size_t *ret_n);
/*
 * Encode an active load option that starts FILE ('/' or '\\' separated,
 * written as the firmware opens it: '\\' separated from the root, "." and
 * ".." resolved) on GPT partition number PARTITION (PARTUUID, START and
 * SIZE in sectors), into a malloc'ed buffer.
 */
int nmbl_load_option_build(const char *description, const char *partuuid,
			   uint32_t partition, uint64_t start, uint64_t size,
			   const char *file, void **ret, size_t *ret_len);
/*
 * Have the firmware start FILE, an EFI program on the partition of DISK
 * ("/dev/vda") that starts at sector START (512-byte units), once, at the
 * next boot: a Boot#### load option for it and BootNext.  The option is
 * the lowest-numbered one that names the same file on the same GPT
 * partition, however its path is spelt (case, '/' or '\\', ".", ".."),
 * else the lowest-numbered one whose description is DESCRIPTION (the
 * caller's own, rewritten for FILE), else a new one at the lowest free
 * number: one DESCRIPTION per caller keeps the options from growing.
 * Variables that already hold what is asked are not written again.  The
 * caller reboots; the boot
 * after goes by BootOrder again.  *RET_NUMBER (may be NULL) is the
 * option's number.
 * -ELOOP, with *RET_NUMBER set all the same so that the caller can name
 * the option: nmbl set BootNext to this option at the last boot and the
 * firmware came back to nmbl without starting it (refused, failed, or
 * returned at once); BootNext is left unset, for the rest of this boot,
 * so that a default entry cannot reboot into the same refusal forever.
 */
int nmbl_set_boot_next(struct nmbl_ctx *ctx, const char *disk, uint64_t start,
		       const char *file, const char *description, unsigned *ret_number);
/* The number of the Boot#### option the firmware started this boot with. */
int nmbl_get_boot_current(struct nmbl_ctx *ctx, unsigned *ret);
int nmbl_read_boot_option(struct nmbl_ctx *ctx, unsigned number,
			  struct nmbl_load_option **ret);

/*
 * nmbl's own A/B slots on the ESP, kept by the firmware (see nmbl(8),
 * "bootcfg").  Two slots, 'a' and 'b', files nmbl-a.efi and nmbl-b.efi
 * each started by its own Boot####.  ESP is the ESP's mount point, or NULL
 * for the first of /efi, /boot/efi and /boot that is a mounted FAT file
 * system; -ENOENT when there is none, -ENOTDIR when ESP is not one.
 */
struct nmbl_slots;
int nmbl_slots_open(struct nmbl_ctx *ctx, const char *esp, struct nmbl_slots **ret);
struct nmbl_slots *nmbl_slots_free(struct nmbl_slots *slots);
const char *nmbl_slots_get_esp(const struct nmbl_slots *slots);
/* The slots' directory as the firmware names it ("\EFI\nmbl"). */
const char *nmbl_slots_get_dir(const struct nmbl_slots *slots);
enum nmbl_slot_state {
	NMBL_SLOT_EMPTY,  /* no file */
	NMBL_SLOT_IDLE,   /* a file, not started by the firmware */
	NMBL_SLOT_GOOD,   /* blessed: first in BootOrder */
	NMBL_SLOT_TRIAL,  /* offered once through BootNext, not blessed yet */
	NMBL_SLOT_FAILED, /* offered, and the firmware started another */
};
enum nmbl_slot_state nmbl_slots_get_state(const struct nmbl_slots *slots, char slot);
const char *nmbl_slot_state_to_string(enum nmbl_slot_state state);
/* The slot's Boot#### number; -ENOENT when it has none. */
int nmbl_slots_get_boot_number(const struct nmbl_slots *slots, char slot);
/* The slot the firmware started this boot with (BootCurrent), or '\0'. */
char nmbl_slots_get_current(const struct nmbl_slots *slots);
/*
 * Put the UKI at path UKI into the slot not in use (a temporary file,
 * fsync, rename), give that slot its Boot#### and point BootNext at it;
 * BootOrder stays as it is.  Under Secure Boot the UKI must be signed by a
 * key of the firmware's db.  With SHIM (its path on the ESP,
 * "\EFI\fedora\shimx64.efi"), the slots live beside shim and their
 * options start shim with the slot's file name as load option; under
 * Secure Boot the UKI must then be signed by a key shim trusts (-ENOKEY
 * when not: nmbl_image_check_shim()), -EINPROGRESS when that key waits
 * for MokManager's confirmation at the next start.  The same
 * UKI again, when it is the good slot or still on trial, changes nothing.
 * *RET_SLOT (may be NULL) is the slot it went to.
 */
int nmbl_slots_install(struct nmbl_slots *slots, const char *uki, const char *shim,
		       char *ret_slot);
enum nmbl_bless_result {
	NMBL_BLESS_NOTHING, /* no slot on trial */
	NMBL_BLESS_PENDING, /* the slot on trial has not been started yet */
	NMBL_BLESS_GOOD,    /* this boot came from it: first in BootOrder now */
	NMBL_BLESS_FAILED,  /* the firmware started another: BootOrder untouched */
};
/* Run in the system nmbl booted, once it is up: see enum nmbl_bless_result. */
int nmbl_slots_bless(struct nmbl_slots *slots, enum nmbl_bless_result *ret);
/* Both slots, their Boot####, nmbl's BootNext, and the BootOrder nmbl
 * found when it first installed (without the slots' options) back. */
int nmbl_slots_remove(struct nmbl_slots *slots);

/*
 * The hardware watchdog that resets a machine whose boot loader hangs
 * before its menu is up (nmbl-init(8)).  nmbl_watchdog_arm() starts the
 * machine's first watchdog with a timeout of SECONDS and gives its
 * descriptor (O_CLOEXEC) and, unless RET_IDENTITY is NULL, the driver's
 * name for it ("i6300ESB timer", "iTCO_wdt"; malloc'ed, "" unknown).
 * -ENOENT: the machine has none; -EBUSY: it could not be stopped again
 * (nowayout), so it is not started; a timeout it does not take: it is
 * stopped again.  The process that armed it names the descriptor to the
 * programs it starts in NMBL_WATCHDOG_FD, and nmbl_watchdog_disarm() stops
 * the watchdog named there (WDIOS_DISABLECARD and the magic close),
 * closes the descriptor and unsets the variable: the menu calls it once
 * it is up, libnmbl's hand-overs (nmbl_exec(), nmbl_reboot(),
 * nmbl_switch_root()) when the menu was skipped.  0 when no watchdog is
 * named; -EBUSY (or the driver's error) when it keeps running, and will
 * reset the machine.
 */
#define NMBL_WATCHDOG_FD "NMBL_WATCHDOG_FD"
int nmbl_watchdog_arm(struct nmbl_ctx *ctx, unsigned seconds, int *ret_fd,
		      char **ret_identity);
int nmbl_watchdog_disarm(void);

/*
 * One sentence saying why nmbl_load() (or another nmbl call) failed with
 * ERR (a negative errno), in terms of the kernel being booted.
 */
const char *nmbl_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
