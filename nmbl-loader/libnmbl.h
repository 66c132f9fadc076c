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
#include <stddef.h>
#include <stdint.h>

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
 * and the root it names is a local file system nmbl mounts itself (no
 * LVM, LUKS, RAID, network root or hibernated system for its own initrd
 * to set up first).  Otherwise NMBL_BOOT_KEXEC, and *RET_REASON (malloc'ed)
 * says why in words that follow "kexec, because ...".  nmbl.boot=kexec on
 * the running kernel's command line asks for kexec always.
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
 * mounted.  Then switch root: with systemd as PID 1 through "systemctl
 * switch-root", returning only on failure; otherwise return 0, and the
 * initramfs's init switches root to /sysroot once the caller has exited.
 * -ENXIO: no such root device; -ENOMEDIUM: no init on it; -ENOENT: no
 * kernel was accepted first, or the accepted one is not the running
 * kernel; -EBUSY: the root's device is still mounted (the new mount would
 * share that mount's options).  Every mount nmbl made is unmounted before
 * the root is mounted.  On failure nothing is left mounted.
 */
int nmbl_switch_root(struct nmbl_ctx *ctx, const char *cmdline);
/* The value of KEY on the command line CMDLINE as the kernel splits it
 * (the last one, quotes removed), malloc'ed; -ENOENT when absent. */
int nmbl_cmdline_get_value(const char *cmdline, const char *key, char **ret);

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
/* 1 when a section or the signature lies past the end of the file. */
int nmbl_image_get_truncated(const struct nmbl_image *img);
/* 1 when the image carries Authenticode signatures. */
int nmbl_image_get_signed(const struct nmbl_image *img);
size_t nmbl_image_get_n_sections(const struct nmbl_image *img);
int nmbl_image_get_section(const struct nmbl_image *img, size_t i,
			   char ret_name[9], uint64_t *ret_size);

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
 * variable cannot be created, so these are written non-volatile; all but
 * the times only when they change.
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
 * else a new one at the lowest free number.  The caller reboots; the boot
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
 * One sentence saying why nmbl_load() (or another nmbl call) failed with
 * ERR (a negative errno), in terms of the kernel being booted.
 */
const char *nmbl_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
