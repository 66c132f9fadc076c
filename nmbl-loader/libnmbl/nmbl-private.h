/* SPDX-License-Identifier: GPL-3.0-or-later */
#ifndef NMBL_PRIVATE_H
#define NMBL_PRIVATE_H

#include <blkid/blkid.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "libnmbl.h"
#include "macro.h"

struct kmod_ctx;

#define NMBL_EXPORT __attribute__((visibility("default")))

/* Nothing nmbl reads from /sys or /proc is anywhere near this big. */
#define NMBL_SMALL_FILE_MAX 4096

struct nmbl_mount {
	struct nmbl_mount *next;
	char *path;
};

struct nmbl_ctx {
	int refcount;
	char *root;
	nmbl_log_fn log_fn;
	void *log_data;
	int log_priority;
	struct nmbl_mount *mounts;
	/* The kernel accepted the last kernel nmbl_load() or nmbl_check()
	 * gave it, and nmbl_unload() has not been called since. */
	bool kernel_accepted;
	/* ... and that kernel is the running one, by the same bytes. */
	bool accepted_is_running;
	/* The kernel nmbl_choose_boot() read last, which nmbl_check() or
	 * nmbl_load() of the same path takes as it is: one descriptor and one
	 * read for the identity check, the trust check and the load. */
	struct nmbl_kernel_file {
		char *path;
		int fd;
		struct nmbl_image *img;
		/* Measured (nmbl_measure_kernel()): not again at the load. */
		bool measured;
	} chosen;
	/* libkmod's context, its indexes loaded once for every lookup. */
	struct kmod_ctx *kmod;
	/* The TPM measured into (tpm.c), opened on first use, and whether
	 * the caller measures (nmbl_set_measure()). */
	struct nmbl_tpm *tpm;
	bool measure;
	/* The initrds nmbl_measure_initrd() measured, held for the load:
	 * each as the descriptor of what was measured. */
	struct nmbl_held_file {
		char *path;
		int fd;
	} *initrds;
	size_t n_initrds;
	/* Why the kernel nmbl_choose_boot() chose boots directly through
	 * its entry's own initrd (its root is a stack that initrd sets up):
	 * NULL when nmbl mounts the root itself. */
	char *handover;
	/* What nmbl_switch_root() prepared and nmbl_switch_root_undo()
	 * undoes: the root on NMBL_SYSROOT (the entry's initrd unpacked
	 * there, for a hand-over), the entry's line over /proc/cmdline, and
	 * the sysctls it set, as they were before ("": left alone); and the
	 * program nmbl-init starts there. */
	struct nmbl_prepared_root {
		bool mounted, bound, handover;
		char printk[64], panic[32];
		char init[256];
	} prepared;
};

void nmbl_log(const struct nmbl_ctx *ctx, int priority, const char *file,
	      int line, const char *fn, const char *format, ...)
	__attribute__((format(printf, 6, 7)));

#define nmbl_log_cond(ctx, prio, ...)                                        \
	do {                                                                 \
		if ((ctx)->log_priority >= (prio))                           \
			nmbl_log(ctx, prio, __FILE__, __LINE__, __func__,    \
				 __VA_ARGS__);                               \
	} while (0)
#define nmbl_dbg(ctx, ...) nmbl_log_cond(ctx, LOG_DEBUG, __VA_ARGS__)
#define nmbl_info(ctx, ...) nmbl_log_cond(ctx, LOG_INFO, __VA_ARGS__)
#define nmbl_notice(ctx, ...) nmbl_log_cond(ctx, LOG_NOTICE, __VA_ARGS__)

/* EFI variables as efivarfs shows them: "<name>-<vendor guid>". */
#define NMBL_EFIVARS "/sys/firmware/efi/efivars/"
#define NMBL_EFI_GLOBAL_GUID "8be4df61-93ca-11d2-aa0d-00e098032b8c"
/* systemd's Boot Loader Interface vendor. */
#define NMBL_LOADER_GUID "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
/* systemd's own vendor: HibernateLocation (systemd 255 and later). */
#define NMBL_SYSTEMD_GUID "8cf2644b-4b0b-428f-9387-6d876050dc67"
/* nmbl's own vendor, for the variables only nmbl reads. */
#define NMBL_VENDOR_GUID "ae17c541-beff-44af-a46f-e16a7a0ed200"

/*
 * EFI variable NAME of vendor GUID below the context's root (efivar.c):
 * the value without efivarfs's attribute word, at most MAX bytes (-EFBIG
 * beyond), malloc'ed and NUL-terminated; written non-volatile with boot
 * service and runtime access; deleted.
 */
int nmbl_efivar_read(const struct nmbl_ctx *ctx, const char *guid, const char *name,
		     size_t max, char **ret, size_t *ret_len);
int nmbl_efivar_write(const struct nmbl_ctx *ctx, const char *guid, const char *name,
		      const void *value, size_t len);
int nmbl_efivar_delete(const struct nmbl_ctx *ctx, const char *guid, const char *name);

/* Little-endian fields of firmware structures (PE, GPT, load options). */
static inline uint16_t nmbl_le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t nmbl_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t nmbl_le64(const unsigned char *p)
{
	return nmbl_le32(p) | (uint64_t)nmbl_le32(p + 4) << 32;
}

/* Big-endian fields (TPM commands, lzop's headers). */
static inline uint16_t nmbl_be16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t nmbl_be32(const unsigned char *p)
{
	return (uint32_t)nmbl_be16(p) << 16 | nmbl_be16(p + 2);
}

/* Milliseconds on the monotonic clock, for deadlines. */
static inline long long nmbl_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void nmbl_put_le16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static inline void nmbl_put_le32(unsigned char *p, uint32_t v)
{
	nmbl_put_le16(p, (uint16_t)v);
	nmbl_put_le16(p + 2, (uint16_t)(v >> 16));
}

static inline void nmbl_put_le64(unsigned char *p, uint64_t v)
{
	nmbl_put_le32(p, (uint32_t)v);
	nmbl_put_le32(p + 4, (uint32_t)(v >> 32));
}

/* nmbl_load_option_build() with optional data after the device path (what
 * the program gets as its load options: shim's second stage, say). */
#define NMBL_LOAD_OPTION_DATA_MAX 4096
int nmbl_load_option_build_data(const char *description, const char *partuuid,
				uint32_t partition, uint64_t start, uint64_t size,
				const char *file, const void *data, size_t data_len,
				void **ret, size_t *ret_len);
/* The load option for FILE (with DATA) on the partition of DISK ("vda")
 * that starts at sector START (bootnext.c). */
int nmbl_boot_option_for(struct nmbl_ctx *ctx, const char *disk, uint64_t start,
			 const char *file, const char *description, const void *data,
			 size_t data_len, void **ret, size_t *ret_len);
/* The lowest Boot#### number that no option uses; -ENOSPC when none. */
int nmbl_boot_option_free_number(struct nmbl_ctx *ctx, unsigned *ret);
/* Whether A and B start the same program on the same partition with the
 * same load options; the lowest Boot#### that starts what WANT starts. */
bool nmbl_load_option_starts_same(const struct nmbl_load_option *a,
				  const struct nmbl_load_option *b);
int nmbl_find_boot_option(struct nmbl_ctx *ctx, const struct nmbl_load_option *want,
			  unsigned *ret);

/* An EFI file path as the firmware opens it on FAT: '\\'-separated from
 * the root, "." and ".." resolved, repeated separators dropped; malloc'ed. */
int nmbl_efi_path_normalize(const char *path, char **ret);
/* Whether two such paths name the same file: FAT ignores (ASCII) case. */
bool nmbl_efi_path_equal(const char *a, const char *b);

/* An EFI_GUID's 16 bytes (three little-endian fields, then 8 bytes) as
 * text: upper case as UEFI prints it, lower case as Linux does. */
void nmbl_format_guid(const unsigned char *guid, bool upper, char ret[37]);
/* The reverse: the 16 bytes of a GUID's text; -EINVAL when it is none. */
int nmbl_parse_guid(const char *text, unsigned char ret[16]);

/* UTF-16LE (up to LEN bytes or a NUL) to a malloc'ed UTF-8 string; an
 * unpaired surrogate becomes U+FFFD. */
int nmbl_utf16_to_utf8(const void *buf, size_t len, char **ret);
/* UTF-8 to malloc'ed NUL-terminated UTF-16LE; *RET_LEN counts the NUL. */
int nmbl_utf8_to_utf16(const char *s, void **ret, size_t *ret_len);

/* Block device names: short, no slash, not "." or "..". */
#define NMBL_NAME_MAX 64
bool nmbl_valid_block_name(const char *name);
/* FN for each block device the kernel has (/sys/class/block: every disk
 * and partition), with its node ("/dev/vda2" below the context's root) and
 * name ("vda2"), until FN returns non-zero, which is returned; 0 when every
 * device was seen, -errno when none could be. */
int nmbl_each_block_device(const struct nmbl_ctx *ctx,
			   int (*fn)(const char *dev, const char *name, void *userdata),
			   void *userdata);
/* A decimal number from a small file below the context's root. */
int nmbl_read_u64(const struct nmbl_ctx *ctx, const char *path, uint64_t *ret);
/* The block device (its name, "vda2") of DISK ("/dev/vda" or "vda")'s
 * partition that starts at START, or DISK itself for 0. */
int nmbl_partition_name(const struct nmbl_ctx *ctx, const char *disk, uint64_t start,
			char *ret_name, size_t size);
/* The name of DISK's partition that starts at START (512-byte sectors),
 * from sysfs; -ENXIO when there is none. */
int nmbl_find_partition(const struct nmbl_ctx *ctx, const char *disk, uint64_t start,
			char *ret_name, size_t size);

/* What libblkid finds on a block device (mount.c). */
struct nmbl_probe {
	/* The file system nmbl mounts, as mount(2) names it ("ext4", "btrfs",
	 * "xfs", "vfat"), when libblkid is sure of it; else NULL. */
	const char *fstype;
	/* How many devices that file system spans (btrfs: its superblock's). */
	uint64_t n_devices;
	/* What some initrd sets up before a file system appears ("LUKS",
	 * "LVM", "RAID (md)", ...), found among all its signatures; NULL. */
	const char *stacked;
	/* A swap that holds a hibernated system (libblkid's "swsuspend"). */
	bool hibernated;
};
/* Probe the file or device PATH from byte OFFSET on (a swap file's header
 * inside a file system: resume_offset=). */
int nmbl_probe_path(const char *path, uint64_t offset, struct nmbl_probe *ret);
/* 1 when the device PATH is a swap holding a hibernated system: the same
 * answer as nmbl_probe_path()'s, for the cost of one read. */
int nmbl_probe_hibernated(const char *path);
/* The same for BUF as a whole device, as tests and fuzzers feed it. */
int nmbl_probe_buffer(const void *buf, size_t len, struct nmbl_probe *ret);
/* The file system on device DEV (NULL *RET_FSTYPE when unknown), and how
 * many devices it spans. */
int nmbl_probe_device(const struct nmbl_ctx *ctx, const char *dev,
		      const char **ret_fstype, uint64_t *ret_n_devices);

/* The unique GUID (lower case) of the GPT partition of disk DEV that starts
 * at sector START (512-byte units), as libblkid reads the table: CRCs
 * checked, the backup header when the primary is damaged (bootnext.c).
 * -ENOTBLK when DEV has no valid GPT, -ENXIO when no entry starts there. */
int nmbl_gpt_partuuid(const char *dev, uint64_t start, char ret[37]);
/* DEV's partition table as libblkid reads it: the probe, which holds its
 * partitions, and its type ("gpt", "dos"); -ENOTBLK without one, -EBADMSG
 * for two that disagree. */
int nmbl_probe_partition_table(const char *dev, blkid_probe *ret_probe, const char **ret_type);

/* The module of file system FSTYPE ("fs-FSTYPE") and what it needs,
 * loaded here rather than by the kernel starting modprobe at the mount;
 * 0 when the kernel has it built in. */
int nmbl_load_fs_module(struct nmbl_ctx *ctx, const char *fstype);

/* How long systemd as PID 1 may take to act on a job it accepted. */
#define NMBL_SYSTEMD_TIMEOUT_SEC 90
bool nmbl_systemd_is_pid1(const struct nmbl_ctx *ctx);

/* "systemctl VERB [ARG]", then wait for systemd to act: returns only on
 * failure (-ETIMEDOUT when systemd accepted but did not act). */
int nmbl_ask_systemd(const char *verb, const char *arg);

/*
 * A kernel command line split as the kernel splits it (cmdline.c): each
 * parameter's text as written, and its key without quotes.
 */
#define NMBL_CMDLINE_MAX (64 * 1024)
struct nmbl_param {
	char *word;
	char *key;
};
struct nmbl_cmdline {
	size_t n;
	struct nmbl_param *params;
};
int nmbl_cmdline_parse(const char *buf, size_t len, struct nmbl_cmdline **ret);
struct nmbl_cmdline *nmbl_cmdline_free(struct nmbl_cmdline *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct nmbl_cmdline *, nmbl_cmdline_free)
#define _cleanup_cmdline_ _cleanup_(nmbl_cmdline_freep)
/* The last parameter named KEY, or NULL. */
const struct nmbl_param *nmbl_cmdline_find(const struct nmbl_cmdline *c,
					   const char *key);
/* Its value, quotes removed, malloc'ed ("" for a bare key); NULL: no memory. */
char *nmbl_param_value(const struct nmbl_param *p);

/* Direct boot: direct.c decides, switch-root.c does.  The running
 * kernel's command line and CMDLINE, split. */
int nmbl_direct_cmdlines(const struct nmbl_ctx *ctx, const char *cmdline,
			 struct nmbl_cmdline **ret_running, struct nmbl_cmdline **ret_entry);
/* What a nmbl_switch_root() that returned 0 prepared, undone when the
 * switch is not made after all: the root unmounted, /proc/cmdline the
 * running kernel's again, the console log level and panic timeout as
 * they were. */
int nmbl_switch_root_undo(struct nmbl_ctx *ctx);
/* The block device root= SPEC names, as "<ctx root>/dev/NAME" in
 * *RET_PATH and NAME in RET_NAME; -ENXIO when none has that name (yet),
 * -EINVAL for a form that is no local block device. */
int nmbl_root_device(const struct nmbl_ctx *ctx, const char *spec,
		     char **ret_path, char ret_name[NMBL_NAME_MAX]);
/* The file system on the root device DEV, malloc'ed: -ENODEV unknown,
 * -EXDEV a btrfs of several devices. */
int nmbl_root_fstype(const struct nmbl_ctx *ctx, const char *dev, char **ret);
/* What an entry's command line asks to mount as its root, and how: root=,
 * rootfstype= (NULL for auto), ro/rw and rootflags= split into mount(2)'s
 * flags and data, init= (NULL for the default).  -EINVAL without root=. */
struct nmbl_root_mount {
	char *spec;
	char *fstype;
	unsigned long flags;
	char *data;
	char *init;
};
int nmbl_root_mount_parse(const struct nmbl_cmdline *entry, struct nmbl_root_mount *ret);
void nmbl_root_mount_clear(struct nmbl_root_mount *m);
/* The console log level C's quiet, debug or loglevel= asks for, as the
 * kernel sets it at its start; 0 for the default. */
int nmbl_cmdline_loglevel(const struct nmbl_cmdline *c);
/* The panic timeout C's last panic= sets; 0 (never) without one. */
long nmbl_cmdline_panic_timeout(const struct nmbl_cmdline *c);

/* PE/COFF, as far as a UKI and a Linux kernel image need it (pe.c). */
#define NMBL_PE_MAX_SECTIONS 96

struct nmbl_pe_section {
	char name[8]; /* NUL-padded, not terminated when 8 long */
	uint32_t offset;
	uint32_t size;
};

struct nmbl_pe {
	const unsigned char *buf;
	size_t len;
	uint16_t machine;
	size_t n_sections;
	struct nmbl_pe_section sections[NMBL_PE_MAX_SECTIONS];
	uint32_t cert_offset, cert_size; /* the security directory */
	bool truncated; /* a section or the signature lies past the end */
	bool is_linux;  /* a Linux boot header ("HdrS") */
	uint16_t linux_protocol;
	uint32_t linux_cmdline_size;  /* bytes, without the NUL */
	const char *linux_version;    /* inside buf, NUL-terminated */
};

/* One file, directory, link or node of an initramfs image, as the kernel
 * would make it: NAME as the archive has it (not checked: the caller
 * decides what a path may be), DATA the file's bytes or a link's target. */
struct nmbl_cpio_entry {
	const char *name;
	uint32_t mode, uid, gid, nlink, mtime;
	uint32_t ino, dev_major, dev_minor, rdev_major, rdev_minor;
	const uint8_t *data;
	size_t size;
};
typedef int (*nmbl_cpio_entry_fn)(const struct nmbl_cpio_entry *e, void *userdata);
#define NMBL_CPIO_TRAILER "TRAILER!!!"

/* Every entry of the initramfs IMAGE (LEN bytes: cpio archives, zero
 * bytes between, any compressed as the kernel takes it: gzip, xz, lzma,
 * zstd, bzip2, lzop, lz4's legacy frames) to FN, in order, each archive's
 * trailer too (NAME NMBL_CPIO_TRAILER, all else 0), with no more than
 * MAX_UNPACKED bytes decompressed.  -EBADMSG for a malformed image, -EFBIG
 * past MAX_UNPACKED or for a stream whose decoder would need more than
 * 128 MiB, or what FN returned when negative. */
int nmbl_initramfs_walk(const void *image, size_t len, size_t max_unpacked,
			nmbl_cpio_entry_fn fn, void *userdata);
/*
 * Decompression (decompress.c).  The formats the kernel takes for an
 * initramfs, told by their magic numbers (lib/decompress.c).
 */
enum nmbl_compression {
	NMBL_UNCOMPRESSED, NMBL_GZIP, NMBL_XZ, NMBL_LZMA, NMBL_ZSTD, NMBL_BZIP2, NMBL_LZ4, NMBL_LZOP,
};
enum nmbl_compression nmbl_compression_of(const uint8_t *p, size_t len);
/* Grow OUT (of SIZE bytes used, *CAP allocated) for more output, within MAX. */
int nmbl_grow(uint8_t **out, size_t *cap, size_t size, size_t max);
/* One step of a streaming decoder (STREAM, the library's): as much as it
 * decodes into OUT, ROOM bytes; *RET_WRITTEN what it wrote, *RET_END
 * whether its stream has ended. */
typedef int (*nmbl_decode_step_fn)(void *stream, uint8_t *out, size_t room,
				   size_t *ret_written, bool *ret_end);
/* STEP on STREAM until the stream ends, the output in *OUT (*SIZE bytes,
 * no more than MAX). */
int nmbl_decode(nmbl_decode_step_fn step, void *stream, size_t max, uint8_t **out,
		size_t *size);
/* ROOM as a 32-bit library's counter takes it. */
unsigned nmbl_room32(size_t room);
/* One stream of IN (LEN bytes) decompressed into *OUT (*SIZE bytes, no
 * more than MAX); *USED, the input it took.  -EBADMSG for a damaged
 * stream, -EFBIG past MAX or for a decoder that would need more than
 * 128 MiB. */
int nmbl_gunzip(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *size,
		size_t *used);
int nmbl_unxz(const uint8_t *in, size_t len, bool alone, size_t max, uint8_t **out,
	      size_t *size, size_t *used);
int nmbl_unzstd(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *size,
		size_t *used);
/* IN (LEN bytes: one gzip, xz or zstd stream, nothing after it)
 * decompressed into a malloc'ed *RET of *RET_LEN bytes, no more than MAX.
 * -EBADMSG for anything else or a damaged stream, -EFBIG past MAX. */
int nmbl_decompress(const void *in, size_t len, size_t max, void **ret, size_t *ret_len);
/* IMAGE unpacked into the directory DFD as the kernel unpacks an initramfs
 * into its root: what the archives name is made there, and nothing a name
 * or a link in them says leads out of it.  Errors as nmbl_initramfs_walk(),
 * or what making a file failed with. */
int nmbl_initramfs_unpack(const void *image, size_t len, size_t max_unpacked, int dfd);

/* -ENOEXEC when BUF is not a PE image. */
int nmbl_pe_parse(const void *buf, size_t len, struct nmbl_pe *ret);
const struct nmbl_pe_section *nmbl_pe_section(const struct nmbl_pe *pe,
					      const char *name);

int nmbl_image_new_from_buffer(const void *buf, size_t len,
			       struct nmbl_image **ret);
int nmbl_image_new_from_fd(struct nmbl_ctx *ctx, int fd, struct nmbl_image **ret);
void nmbl_kernel_file_clear(struct nmbl_kernel_file *k);
/* The PE whose signature kexec checks: the kernel itself, or a UKI's .linux. */
const struct nmbl_pe *nmbl_image_signing_pe(const struct nmbl_image *img);
/* A certificate's name as people call it: its CN, else its O, else the
 * whole name as one line; malloc'ed, NULL when it is no text (sign.c). */
typedef struct X509_name_st X509_NAME;
char *nmbl_x509_name(const X509_NAME *name);
/* The signers of PE's Authenticode signatures, as one line (sign.c). */
int nmbl_pe_signers(const struct nmbl_pe *pe, char **ret);
/* The PE the firmware starts: the whole file, a UKI's too. */
const struct nmbl_pe *nmbl_image_pe(const struct nmbl_image *img);

/*
 * UEFI signature databases (db, dbx): EFI_SIGNATURE_LISTs, parsed into
 * their entries (authenticode.c).  Each entry's data is what follows its
 * owner GUID, inside the buffer parsed; types UEFI defines but nmbl does
 * not use are left out.  -EBADMSG for a list that breaks its own sizes.
 */
enum nmbl_sig_type {
	NMBL_SIG_OTHER,
	NMBL_SIG_X509,        /* a DER certificate */
	NMBL_SIG_SHA1,        /* an image's Authenticode hash */
	NMBL_SIG_SHA256,
	NMBL_SIG_SHA384,
	NMBL_SIG_SHA512,
	NMBL_SIG_X509_SHA256, /* a TBSCertificate's hash, a revocation time */
	NMBL_SIG_X509_SHA384,
	NMBL_SIG_X509_SHA512,
};
struct nmbl_sig {
	enum nmbl_sig_type type;
	const unsigned char *data;
	size_t len;
};
struct nmbl_sigdb {
	size_t n;
	struct nmbl_sig *sigs;
};
int nmbl_sigdb_parse(const void *buf, size_t len, struct nmbl_sigdb **ret);
struct nmbl_sigdb *nmbl_sigdb_free(struct nmbl_sigdb *db);
/* The largest digest nmbl makes (SHA-512). */
#define NMBL_DIGEST_MAX 64
/* PE's Authenticode hash with digest MD_NAME ("SHA256"), as the firmware
 * computes it; -EBADMSG when the headers or sections leave the file. */
int nmbl_pe_authenticode_digest(const struct nmbl_pe *pe, const char *md_name,
				unsigned char ret[NMBL_DIGEST_MAX], size_t *ret_len);
/* nmbl_image_check_firmware() of PE, against DB and DBX as given. */
int nmbl_pe_check_firmware(const struct nmbl_pe *pe, const struct nmbl_sigdb *db,
			   const struct nmbl_sigdb *dbx, char **ret_signer);

/* Whether a key waiting for MokManager's confirmation (MokNew) signed IMG. */
bool nmbl_image_mok_pending(struct nmbl_ctx *ctx, const struct nmbl_image *img);

/* A section's bytes, inside the image's mapping; -ENOENT when absent. */
int nmbl_image_section_data(const struct nmbl_image *img, const char *name,
			    const void **ret_data, size_t *ret_size);

/* The fields of a uevent nmbl acts on, pointing into the message; NULL
 * when absent. */
struct nmbl_uevent {
	const char *action;
	const char *subsystem;
	const char *devname;
	const char *modalias;
};

/* Parse a NETLINK_KOBJECT_UEVENT message from the kernel: -EBADMSG
 * unless it is "ACTION@DEVPATH" and NUL-terminated KEY=VALUE strings with
 * an ACTION. */
int nmbl_uevent_parse(const char *msg, size_t len, struct nmbl_uevent *ret);

/* VALUE as udev spells it in a /dev/disk/by-* name ("my disk" is
 * "my\x20disk"), malloc'ed; NULL when out of memory or not spellable. */
char *nmbl_udev_encode(const char *value);

/* A..F to a..f in place: a GUID as udev's links spell it. */
static inline void nmbl_hex_lower(char *s)
{
	for (; *s; s++)
		if (*s >= 'A' && *s <= 'F')
			*s = (char)(*s - 'A' + 'a');
}

/* Drop the context's libkmod context (opened on first use). */
void nmbl_modules_release(struct nmbl_ctx *ctx);

/*
 * Measured boot (tpm.c).  Each returns 0 without a TPM 2.0, or when the
 * caller does not measure, having done nothing.  FD's contents into PCR as the file GRUB calls NAME, copied to
 * COPY_TO (unless -1) as they are hashed, -EFBIG past MAX bytes; a bare
 * PCR 11 phase string, as systemd-pcrphase measures one; the context's TPM
 * closed.
 */
int nmbl_measure_fd(struct nmbl_ctx *ctx, unsigned pcr, int fd, const char *name, int copy_to,
		    size_t max);
int nmbl_measure_phase(struct nmbl_ctx *ctx, const char *phase);
/* 1 when the caller measures and there is a TPM 2.0 to measure into. */
int nmbl_tpm_measuring(struct nmbl_ctx *ctx);
void nmbl_tpm_release(struct nmbl_ctx *ctx);
/* The algorithms of the PCR banks a TPM2_GetCapability(TPM_CAP_PCRS)
 * response of LEN bytes says are allocated (a PCR selected), at most MAX;
 * -EBADMSG for a response that breaks its own sizes. */
int nmbl_tpm_parse_banks(const void *buf, size_t len, uint16_t *ret_algs, size_t max,
			 size_t *ret_n);
/*
 * What a kexec'd kernel gets of the measurements, an uncompressed cpio
 * archive for its initrd (*RET NULL without a TPM): /.extra/nmbl/ holding
 * both logs as they will be once PHASE is measured, and the IMA
 * measurement list as it is now.
 */
int nmbl_tpm_handover_cpio(struct nmbl_ctx *ctx, const char *phase, void **ret,
			   size_t *ret_len);
/*
 * A broker message (broker.c): a request with its fields, pointing into
 * the datagram parsed; -EBADMSG for one that breaks the protocol (an
 * unknown request, fields of the wrong number or shape, bytes after
 * them).  Building one from WORD (a request, or a reply's result) and N
 * FIELDS into BUF of SIZE bytes: -E2BIG when they do not fit.
 */
struct nmbl_broker_message {
	enum nmbl_broker_request request;
	size_t n_fields;
	const char *fields[NMBL_BROKER_FIELDS_MAX];
};
int nmbl_broker_parse(const void *buf, size_t len, struct nmbl_broker_message *ret);
int nmbl_broker_build(uint32_t word, const char *const *fields, size_t n, void *buf,
		      size_t size, size_t *ret_len);

/* The held initrds dropped. */
void nmbl_held_initrds_clear(struct nmbl_ctx *ctx);

/* "<root><path>", malloc'ed; NULL when out of memory. */
char *nmbl_path(const struct nmbl_ctx *ctx, const char *path);

/* read(2) until SIZE bytes or end of file; the count read, or -errno. */
ssize_t nmbl_read_full(int fd, void *buf, size_t size);
int nmbl_write_full(int fd, const void *buf, size_t len);
int nmbl_memfd_of(const char *name, const void *data, size_t len, int *ret_fd);

/* /proc/keys of a machine with many keys stays far below this. */
#define NMBL_PROC_KEYS_MAX (1024 * 1024)
/* /proc/self/mountinfo: a line per mount, far fewer in an initramfs. */
#define NMBL_MOUNTINFO_MAX (1024 * 1024)

/* The running kernel's release ("6.1.0-28-amd64"), as /proc/version says. */
int nmbl_running_release(const struct nmbl_ctx *ctx, char *buf, size_t size);
/* INIT, followed inside ROOT as the target will follow it, is a program:
 * -ENOMEDIUM when not. */
int nmbl_check_init(const char *root, const char *init);
/* The entry's command line CMDLINE bound over PROC (a path to a
 * /proc/cmdline), read-only. */
int nmbl_bind_cmdline(const struct nmbl_ctx *ctx, const char *cmdline, const char *proc);
/*
 * The hand-over (handover.c): the initrds the context holds unpacked into
 * a tmpfs mounted on SYSROOT, which must hold the running kernel's modules
 * (-ENOPKG when not: the entry's own kernel, by kexec, can use them) and
 * INIT, the program to start there (the entry's rdinit=, or /init, written
 * to INIT).  On failure nothing is left mounted.
 */
int nmbl_handover_prepare(struct nmbl_ctx *ctx, const struct nmbl_cmdline *entry,
			  const char *sysroot, char *init, size_t init_size);
/* Then what makes CMDLINE the command line the initrd reads. */
int nmbl_handover_cmdline(struct nmbl_ctx *ctx, const char *sysroot, const char *cmdline);

/* GRUB's names of an md array, from what libblkid reads in a member
 * (LABEL, "host:name" or "name"; UUID): *RET_NAME "md/name" (NULL for an
 * array without a name), *RET_ID_NAME "mduuid/<32 hex digits>".  And of
 * an LVM logical volume, from device-mapper's name and UUID
 * ("LVM-<VG UUID><LV UUID>"): "lvm/VG-LV", "lvmid/VGUUID/LVUUID".
 * -EINVAL for what GRUB would not name so. */
int nmbl_md_map_names(const char *label, const char *uuid, char **ret_name, char **ret_id_name);
int nmbl_lvm_map_names(const char *dm_name, const char *dm_uuid, char **ret_name,
		       char **ret_id_name);

/* Read a whole file below the context's root, at most MAX bytes (-EFBIG
 * beyond), NUL-terminated, into a malloc'ed buffer. */
int nmbl_read_file(const struct nmbl_ctx *ctx, const char *path, size_t max,
		   char **ret, size_t *ret_len);
/* The same of FD, from its start (-EFBIG before reading when its size says
 * so, -EISDIR for a directory): read, never mapped, so that a read error
 * of the disk (a bad block, a USB stick pulled out) is -EIO, where a
 * mapping would kill process 1 with SIGBUS. */
int nmbl_read_fd(int fd, size_t max, char **ret, size_t *ret_len);
/* The most of a kernel, an initrd, or what one unpacks to, that nmbl
 * holds in memory: 1 GiB, or half of the machine's memory when that is
 * less (ctx.c says why).  Beyond it, -EFBIG. */
size_t nmbl_file_max(void);

/*
 * Read a small text file below the context's root into BUF, NUL-terminated,
 * trailing newline removed.  -EFBIG when it does not fit.
 */
int nmbl_read_small(const struct nmbl_ctx *ctx, const char *path, char *buf,
		    size_t size);

DEFINE_TRIVIAL_CLEANUP_FUNC(blkid_probe, blkid_free_probe)
#define _cleanup_blkid_probe_ _cleanup_(blkid_free_probep)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct nmbl_image *, nmbl_image_unref)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct nmbl_load_option *, nmbl_load_option_free)

/* Where nmbl mounts the partitions GRUB reads files from. */
#define NMBL_MOUNT_DIR "/run/nmbl/mnt"
int nmbl_open_regular(const struct nmbl_ctx *ctx, const char *path);

/*
 * The seam: every call that changes the machine goes through here, so the
 * unit tests can record it and inject failures (test/unit/fake-sys.c).
 * Each returns 0 or a negative errno.
 */
int nmbl_sys_kexec_file_load(int kernel_fd, int initrd_fd,
			     const char *cmdline, unsigned long flags);
/* kexec_file_load(2) of KERNEL_FD alone, with a command line the kernel
 * cannot read: -EFAULT once it has checked the kernel (see nmbl_check()). */
int nmbl_sys_kexec_file_check(int kernel_fd);
int nmbl_sys_mount(const char *source, const char *target,
		   const char *fstype, unsigned long flags, const char *data);
int nmbl_sys_umount(const char *target);
/* TARGET and what is mounted below it, detached. */
int nmbl_sys_umount_tree(const char *target);
/* reboot(2): into the loaded kernel, or through the firmware. */
int nmbl_sys_reboot(bool kexec);
/* "systemctl VERB [ARG]": kexec, reboot, switch-root DIR. */
int nmbl_sys_systemctl(const char *verb, const char *arg);
int nmbl_sys_finit_module(int fd, const char *params);
/* DATA is the 4-byte attribute word, then the value, written at once. */
int nmbl_sys_efivar_write(const char *path, const void *data, size_t len);
int nmbl_sys_efivar_delete(const char *path);
/* Microseconds since the machine's reset (the CPU's counter), and since
 * the running kernel started; -EOPNOTSUPP without a usable counter. */
int nmbl_sys_boot_clock(uint64_t *ret_now_usec, uint64_t *ret_kernel_usec);
/* The watchdog device PATH opened, which starts it: its descriptor.  Its
 * timeout set, *SECONDS what the driver made of it.  Stopped (and the
 * magic close written) and the descriptor closed; when FD is no watchdog
 * (-ENOTTY, -EBADF), left alone. */
int nmbl_sys_watchdog_open(const char *path);
int nmbl_sys_watchdog_set_timeout(int fd, unsigned *seconds);
int nmbl_sys_watchdog_stop(int fd);
/* The TPM's character device opened; one command written to FD and its
 * response read (the count read). */
int nmbl_sys_tpm_open(const char *path);
ssize_t nmbl_sys_tpm_transmit(int fd, const void *cmd, size_t len, void *resp, size_t size);
/* Read-only, but the kernel's keyrings are no file a test can fake. */
long nmbl_sys_keyring_read(int32_t keyring, int32_t *buf, size_t len);
int nmbl_sys_key_describe(int32_t key, char *buf, size_t len);

#endif
