/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl - load and boot Linux kernels through libnmbl.
 *
 * Exit codes: 0 success, 1 the operation failed, 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <time.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/utsname.h>

#include "libnmbl.h"

#define EXIT_USAGE 2

struct load_args {
	const char *kernel;
	const char **initrds;
	size_t n_initrds;
	const char *cmdline;
	bool reuse_cmdline;
	const char *append;
};

static void usage_main(FILE *f)
{
	fputs("Usage: nmbl [--verbose] [--root DIR] VERB [ARGS]\n"
	      "\n"
	      "Verbs:\n"
	      "  load KERNEL [--initrd FILE]... [--cmdline TEXT | --reuse-cmdline]\n"
	      "       [--append TEXT]\n"
	      "                 load a kernel with kexec_file_load\n"
	      "  exec           boot the loaded kernel\n"
	      "  boot KERNEL ...  load, then exec\n"
	      "  unload         forget the loaded kernel\n"
	      "  status [--json]  Secure Boot, Setup Mode, lockdown, kexec state,\n"
	      "                   the firmware's boot option\n"
	      "  modprobe ALIAS...  load kernel modules and their dependencies\n"
	      "  coldplug       load the modules of present disks and keyboards\n"
	      "  inspect FILE [--json]\n"
	      "                 what a kernel image or UKI is and holds\n"
	      "  bootcfg install UKI | bless | status [--json] | remove\n"
	      "                 nmbl's own A/B slots on the ESP\n"
	      "\n"
	      "Run 'nmbl VERB --help' for a verb's options.\n"
	      "Exit status: 0 success, 1 failure, 2 usage error.\n",
	      f);
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "nmbl: %s: %s\n", what, nmbl_strerror(err));
	return EXIT_FAILURE;
}

static int parse_load(int argc, char **argv, const char *verb,
		      struct load_args *ret)
{
	static const struct option opts[] = {
		{ "initrd", required_argument, NULL, 'i' },
		{ "cmdline", required_argument, NULL, 'c' },
		{ "reuse-cmdline", no_argument, NULL, 'r' },
		{ "append", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct load_args a = { .cmdline = "" };
	int c;

	a.initrds = calloc((size_t)argc, sizeof(*a.initrds));
	if (!a.initrds)
		return -ENOMEM;
	while ((c = getopt_long(argc, argv, "i:c:ra:h", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			a.initrds[a.n_initrds++] = optarg;
			break;
		case 'c':
			a.cmdline = optarg;
			break;
		case 'r':
			a.reuse_cmdline = true;
			break;
		case 'a':
			a.append = optarg;
			break;
		case 'h':
			printf("Usage: nmbl %s KERNEL [--initrd FILE]... "
			       "[--cmdline TEXT | --reuse-cmdline] [--append TEXT]\n"
			       "Load KERNEL (a kernel image or a UKI) with kexec_file_load%s.\n"
			       "  --initrd FILE     an initrd; several are concatenated in order\n"
			       "  --cmdline TEXT    the new kernel's command line\n"
			       "  --reuse-cmdline   the running kernel's, without BOOT_IMAGE=\n"
			       "  --append TEXT     added to the command line\n",
			       verb, verb[0] == 'b' ? ", then boot it" : "");
			free(a.initrds);
			exit(EXIT_SUCCESS);
		default:
			free(a.initrds);
			return -EINVAL;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "nmbl %s: exactly one KERNEL expected\n", verb);
		free(a.initrds);
		return -EINVAL;
	}
	if (a.reuse_cmdline && *a.cmdline) {
		fprintf(stderr, "nmbl %s: --cmdline and --reuse-cmdline exclude each other\n",
			verb);
		free(a.initrds);
		return -EINVAL;
	}
	a.kernel = argv[optind];
	*ret = a;
	return 0;
}

static bool want_help(int argc, char **argv)
{
	return argc > 1 && (strcmp(argv[1], "--help") == 0 ||
			    strcmp(argv[1], "-h") == 0);
}

/* The first line of a small file, without its newline ("" when the file
 * is empty); NULL when it cannot be opened. */
static char *fgets_file(const char *path, char *buf, int size)
{
	FILE *f = fopen(path, "re");

	if (!f)
		return NULL;
	if (!fgets(buf, size, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

/* The running kernel's command line, less the image it was booted from. */
static int running_cmdline(struct nmbl_ctx *ctx, char **ret)
{
	char *text;
	int r;

	r = nmbl_get_kernel_cmdline(ctx, &text);
	if (r < 0)
		return r;
	r = nmbl_cmdline_remove(text, "BOOT_IMAGE", ret);
	free(text);
	return r;
}

/* ROOT: --root's, for the messages (NULL without it). */
static int do_load(struct nmbl_ctx *ctx, const char *root, int argc, char **argv, bool boot)
{
	struct load_args a;
	char *cmdline = NULL;
	int r;

	if (parse_load(argc, argv, boot ? "boot" : "load", &a) < 0)
		return EXIT_USAGE;
	if (a.reuse_cmdline) {
		r = running_cmdline(ctx, &cmdline);
		if (r < 0) {
			char *path = NULL;

			/* The file libnmbl read: /proc/cmdline below --root. */
			if (asprintf(&path, "%s/proc/cmdline",
				     root && strcmp(root, "/") != 0 ? root : "") < 0)
				path = NULL;
			fail(path ? path : "/proc/cmdline", r);
			free(path);
			free(a.initrds);
			return EXIT_FAILURE;
		}
		a.cmdline = cmdline;
	}
	if (a.append) {
		char *joined;

		if (asprintf(&joined, "%s%s%s", a.cmdline, *a.cmdline ? " " : "",
			     a.append) < 0) {
			free(cmdline);
			free(a.initrds);
			return fail("append", -ENOMEM);
		}
		free(cmdline);
		a.cmdline = cmdline = joined;
	}
	r = nmbl_load(ctx, a.kernel, a.initrds, a.n_initrds, a.cmdline);
	free(cmdline);
	free(a.initrds);
	if (r < 0) {
		char *why = NULL;

		fail(a.kernel, r);
		if (nmbl_explain_refusal(ctx, a.kernel, r, &why) == 0)
			fputs(why, stderr);
		free(why);
		return EXIT_FAILURE;
	}
	if (!boot)
		return EXIT_SUCCESS;
	r = nmbl_exec(ctx);
	return fail("exec", r);
}

static void json_string(const char *s);

static const char *tristate(int v, const char *yes, const char *no, bool json)
{
	if (v < 0)
		return json ? "null" : "unknown";
	return v ? yes : no;
}

/* The firmware's boot option that started this boot, if it says. */
static struct nmbl_load_option *boot_current(struct nmbl_ctx *ctx, unsigned *ret_number)
{
	struct nmbl_load_option *opt = NULL;

	if (nmbl_get_boot_current(ctx, ret_number) < 0 ||
	    nmbl_read_boot_option(ctx, *ret_number, &opt) < 0)
		return NULL;
	return opt;
}

/*
 * Where this boot's time went so far: the kernel's own start (until it ran
 * the initramfs's init, by its log's timestamp), within it the unpacking of
 * the initramfs (from its first line of it to the freeing of the image),
 * and the initramfs's (until now).  -1 when the kernel log does not say.
 */
struct startup {
	long long kernel_usec, unpack_usec, unpacked_usec, now_usec;
};

static bool begins(const char *text, const char *prefix)
{
	return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* The kernel log's lines that mark a step, and where each goes. */
static long long *startup_step(struct startup *st, const char *text)
{
	if (begins(text, "Trying to unpack rootfs image as initramfs"))
		return &st->unpack_usec;
	if (begins(text, "Freeing initrd memory: "))
		return &st->unpacked_usec;
	if (begins(text, "Run ") && strstr(text, " as init process"))
		return &st->kernel_usec;
	return NULL;
}

static void startup_times(struct startup *st)
{
	char rec[2048];
	struct timespec now;
	int fd;

	st->kernel_usec = st->unpack_usec = st->unpacked_usec = -1;
	clock_gettime(CLOCK_BOOTTIME, &now);
	st->now_usec = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
	fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	/* One record per read: "prio,seq,usec,flags;text". */
	for (;;) {
		ssize_t n = read(fd, rec, sizeof(rec) - 1);
		long long usec, *step;
		char *text;

		if (n < 0 && errno == EPIPE)
			continue; /* records lost to a full buffer: read on */
		if (n <= 0)
			break;
		rec[n] = '\0';
		text = strchr(rec, ';');
		step = text ? startup_step(st, text + 1) : NULL;
		if (step && *step < 0 && sscanf(rec, "%*d,%*u,%lld", &usec) == 1)
			*step = usec;
		if (st->kernel_usec >= 0)
			break;
	}
	close(fd);
}

/* Memory in use (MemTotal - MemAvailable), KiB; -1 unknown. */
static long long memory_used_kib(void)
{
	long long total = -1, avail = -1;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "MemTotal: %lld kB", &total);
		sscanf(line, "MemAvailable: %lld kB", &avail);
	}
	fclose(f);
	return total < 0 || avail < 0 ? -1 : total - avail;
}

static int do_status(struct nmbl_ctx *ctx, bool json)
{
	struct nmbl_load_option *opt;
	enum nmbl_lockdown lockdown;
	unsigned number = 0;
	const char *ld;
	struct utsname u;
	char boot_id[40];
	struct startup st;
	long long mem;
	int sb, setup, loaded;

	sb = nmbl_get_secure_boot(ctx);
	setup = nmbl_get_setup_mode(ctx);
	ld = nmbl_get_lockdown(ctx, &lockdown) < 0 ? NULL : nmbl_lockdown_to_string(lockdown);
	loaded = nmbl_get_kexec_loaded(ctx);
	if (uname(&u) < 0)
		u.release[0] = '\0';
	/* Which kernel boot this is: a direct boot keeps it, a kexec not. */
	if (!fgets_file("/proc/sys/kernel/random/boot_id", boot_id, sizeof(boot_id)))
		boot_id[0] = '\0';
	startup_times(&st);
	mem = memory_used_kib();
	opt = boot_current(ctx, &number);
	if (json) {
		printf("{\"secure_boot\":%s,\"setup_mode\":%s,\"lockdown\":",
		       tristate(sb, "true", "false", true), tristate(setup, "true", "false", true));
		if (ld)
			json_string(ld);
		else
			fputs("null", stdout);
		printf(",\"kexec_loaded\":%s,\"kernel\":", tristate(loaded, "true", "false", true));
		json_string(u.release);
		fputs(",\"boot_id\":", stdout);
		json_string(boot_id);
		printf(",\"uptime_usec\":%lld,\"kernel_usec\":", st.now_usec);
		if (st.kernel_usec >= 0)
			printf("%lld", st.kernel_usec);
		else
			fputs("null", stdout);
		fputs(",\"memory_used_kib\":", stdout);
		if (mem >= 0)
			printf("%lld", mem);
		else
			fputs("null", stdout);
		fputs(",\"boot_current\":", stdout);
		if (opt) {
			printf("{\"number\":%u,\"description\":", number);
			json_string(nmbl_load_option_get_description(opt));
			fputs(",\"device_path\":", stdout);
			json_string(nmbl_load_option_get_device_path(opt));
			putchar('}');
		} else {
			fputs("null", stdout);
		}
		puts("}");
		nmbl_load_option_free(opt);
		return EXIT_SUCCESS;
	}
	printf("secure-boot: %s\n", tristate(sb, "enabled", "disabled", false));
	printf("setup-mode: %s\n", tristate(setup, "yes", "no", false));
	printf("lockdown: %s\n", ld ? ld : "unknown");
	printf("kexec-loaded: %s\n", tristate(loaded, "yes", "no", false));
	printf("kernel: %s\n", u.release);
	printf("boot-id: %s\n", boot_id);
	if (st.kernel_usec >= 0)
		printf("startup: kernel %.3f s, userspace %.3f s so far\n", st.kernel_usec / 1e6,
		       (st.now_usec - st.kernel_usec) / 1e6);
	if (st.kernel_usec >= 0 && st.unpack_usec >= 0 && st.unpacked_usec >= 0)
		printf("initramfs-unpacked: %.3f-%.3f s\n", st.unpack_usec / 1e6,
		       st.unpacked_usec / 1e6);
	if (st.kernel_usec < 0)
		printf("startup: %.3f s\n", st.now_usec / 1e6);
	if (mem >= 0)
		printf("memory-used: %lld KiB\n", mem);
	if (opt)
		printf("boot-current: Boot%04X \"%s\" %s\n", number,
		       nmbl_load_option_get_description(opt),
		       nmbl_load_option_get_device_path(opt));
	else
		printf("boot-current: unknown\n");
	nmbl_load_option_free(opt);
	return EXIT_SUCCESS;
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* The signers of an image, as a JSON array or a list for people. */
static void print_signers(char **signers, int n, bool json)
{
	if (n < 0) {
		fputs(json ? "null" : "(a malformed signature)", stdout);
		return;
	}
	if (json)
		putchar('[');
	for (int i = 0; i < n; i++) {
		fputs(i ? (json ? "," : ", ") : "", stdout);
		if (json)
			json_string(signers[i]);
		else
			printf("'%s'", signers[i]);
	}
	fputs(json ? "]" : n ? "" : "none", stdout);
}

static int do_inspect(struct nmbl_ctx *ctx, int argc, char **argv)
{
	struct nmbl_image *img;
	const char *path = NULL, *version;
	char **signers = NULL, *trusted_by = NULL;
	bool json = false;
	size_t n;
	int r, running, n_signers, trusted;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = true;
		} else if (strcmp(argv[i], "--help") == 0) {
			printf("Usage: nmbl inspect FILE [--json]\n"
			       "Type, kernel version, whether it is the running kernel,\n"
			       "sections and signature state of a kernel image or UKI:\n"
			       "who signed the kernel kexec checks, and whether the keys\n"
			       "the running kernel trusts for kexec trust it.\n");
			return EXIT_SUCCESS;
		} else if (!path) {
			path = argv[i];
		} else {
			fprintf(stderr, "nmbl inspect: one FILE expected\n");
			return EXIT_USAGE;
		}
	}
	if (!path) {
		fprintf(stderr, "nmbl inspect: FILE expected\n");
		return EXIT_USAGE;
	}
	r = nmbl_image_new_from_file(ctx, path, &img);
	if (r < 0)
		return fail(path, r);
	version = nmbl_image_get_version(img);
	running = nmbl_image_is_running_kernel(ctx, img);
	n = nmbl_image_get_n_sections(img);
	n_signers = nmbl_image_get_signers(img, &signers);
	trusted = nmbl_image_is_trusted(ctx, img, &trusted_by);
	if (json) {
		printf("{\"type\":\"%s\",\"version\":",
		       nmbl_image_type_to_string(nmbl_image_get_type(img)));
		if (version)
			json_string(version);
		else
			fputs("null", stdout);
		printf(",\"running\":%s", tristate(running, "true", "false", true));
		printf(",\"cmdline_max\":%zu,\"signed\":%s,\"truncated\":%s,\"signers\":",
		       nmbl_image_get_cmdline_max(img),
		       nmbl_image_get_signed(img) ? "true" : "false",
		       nmbl_image_get_truncated(img) ? "true" : "false");
		print_signers(signers, n_signers, true);
		printf(",\"trusted\":%s,\"trusted_by\":", tristate(trusted, "true", "false", true));
		if (trusted_by)
			json_string(trusted_by);
		else
			fputs("null", stdout);
		fputs(",\"sections\":[", stdout);
	} else {
		printf("type: %s\nversion: %s\nrunning: %s\ncmdline-max: %zu\nsigned: %s\n"
		       "truncated: %s\nsigners: ",
		       nmbl_image_type_to_string(nmbl_image_get_type(img)),
		       version ? version : "-", tristate(running, "yes", "no", false),
		       nmbl_image_get_cmdline_max(img),
		       nmbl_image_get_signed(img) ? "yes" : "no",
		       nmbl_image_get_truncated(img) ? "yes" : "no");
		print_signers(signers, n_signers, false);
		printf("\ntrusted: %s", tristate(trusted, "yes", "no", false));
		if (trusted_by)
			printf(", by '%s'", trusted_by);
		fputs("\nsections:\n", stdout);
	}
	free(signers);
	free(trusted_by);
	for (size_t i = 0; i < n; i++) {
		char name[9];
		uint64_t size;

		nmbl_image_get_section(img, i, name, &size);
		if (json) {
			printf("%s{\"name\":", i ? "," : "");
			json_string(name);
			printf(",\"size\":%llu}", (unsigned long long)size);
		} else {
			printf("  %-8s %llu\n", name, (unsigned long long)size);
		}
	}
	if (json)
		puts("]}");
	nmbl_image_unref(img);
	return EXIT_SUCCESS;
}

static void print_slot(const struct nmbl_slots *s, char slot, bool json)
{
	enum nmbl_slot_state state = nmbl_slots_get_state(s, slot);
	int boot = nmbl_slots_get_boot_number(s, slot);
	char path[512];

	snprintf(path, sizeof(path), "%s\\nmbl-%c.efi", nmbl_slots_get_dir(s), slot);
	if (json) {
		printf("%s{\"slot\":\"%c\",\"path\":", slot == 'a' ? "" : ",", slot);
		json_string(path);
		printf(",\"state\":\"%s\",\"boot\":", nmbl_slot_state_to_string(state));
		if (boot >= 0)
			printf("\"Boot%04X\"}", boot);
		else
			fputs("null}", stdout);
		return;
	}
	printf("slot %c: %-6s %s", slot, nmbl_slot_state_to_string(state), path);
	if (boot >= 0)
		printf(" (Boot%04X)", boot);
	putchar('\n');
}

static int bootcfg_status(const struct nmbl_slots *s, bool json)
{
	char cur = nmbl_slots_get_current(s);

	if (json) {
		fputs("{\"esp\":", stdout);
		json_string(nmbl_slots_get_esp(s));
		fputs(",\"slots\":[", stdout);
		print_slot(s, 'a', true);
		print_slot(s, 'b', true);
		printf("],\"current\":");
		if (cur)
			printf("\"%c\"}\n", cur);
		else
			puts("null}");
		return EXIT_SUCCESS;
	}
	printf("esp: %s\n", nmbl_slots_get_esp(s));
	print_slot(s, 'a', false);
	print_slot(s, 'b', false);
	printf("current: %s\n", cur == 'a' ? "slot a" : cur == 'b' ? "slot b" : "not a slot");
	return EXIT_SUCCESS;
}

/* Why a UKI was not put into a slot, or the slots could not be kept. */
static const char *bootcfg_strerror(int err)
{
	switch (-err) {
	case ENODATA:
		return "the UKI is not signed, and under Secure Boot the firmware starts only "
		       "signed programs";
	case EKEYREJECTED:
		return "the UKI is signed by no key of the firmware's db, or is revoked in its "
		       "dbx: the firmware would refuse it";
	case ENOKEY:
		return "the UKI is signed by no key shim trusts (the firmware's db, shim's own "
		       "certificate, a Machine Owner Key), or is revoked: shim would refuse it";
	case EINPROGRESS:
		return "the key that signed the UKI waits to be enrolled as a Machine Owner Key: "
		       "confirm it in MokManager at the next start, then install the UKI again";
	case ENOEXEC:
		return "the file is not a UKI (kernel, initrd and command line in one EFI program)";
	case EBADMSG:
		return "the file is malformed or truncated";
	case EEXIST:
		return "nmbl's slots are beside another shim: remove them first";
	case ENOSPC:
		return "the ESP (or the firmware's variable store) is full; the slots are as "
		       "they were";
	case ENOTDIR:
		return "not the mount point of a FAT file system";
	case EROFS:
		return "the ESP's file system has errors (Linux made it read-only): check it "
		       "with fsck.vfat, then install again; the firmware boots the good slot";
	case ENOENT:
		return "no such file, or no ESP mounted on /efi, /boot/efi or /boot";
	case ENOTBLK:
		return "the ESP is not a partition of a disk the firmware can name";
	default:
		return nmbl_strerror(err);
	}
}

static int bootcfg_fail(const char *what, int err)
{
	fprintf(stderr, "nmbl: %s: %s\n", what, bootcfg_strerror(err));
	return EXIT_FAILURE;
}

static int do_bootcfg(struct nmbl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "esp", required_argument, NULL, 'e' },
		{ "shim", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *esp = NULL, *shim = NULL, *sub;
	struct nmbl_slots *s = NULL;
	bool json = false;
	int c, r;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'e':
			esp = optarg;
			break;
		case 's':
			shim = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			printf("Usage: nmbl bootcfg install UKI [--esp DIR] [--shim PATH]\n"
			       "       nmbl bootcfg bless [--esp DIR]\n"
			       "       nmbl bootcfg status [--json] [--esp DIR]\n"
			       "       nmbl bootcfg remove [--esp DIR]\n"
			       "nmbl's two slots on the ESP, kept by the firmware: a new UKI is\n"
			       "offered once through BootNext, and booted by BootOrder once the\n"
			       "system it started has blessed it.\n");
			return EXIT_SUCCESS;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "nmbl bootcfg: install, bless, status or remove expected\n");
		return EXIT_USAGE;
	}
	sub = argv[optind++];
	if (strcmp(sub, "install") == 0 ? optind + 1 != argc : optind != argc) {
		fprintf(stderr, "nmbl bootcfg %s: %s\n", sub,
			strcmp(sub, "install") == 0 ? "one UKI expected" : "no arguments expected");
		return EXIT_USAGE;
	}
	if ((json && strcmp(sub, "status") != 0) || (shim && strcmp(sub, "install") != 0)) {
		fprintf(stderr, "nmbl bootcfg %s: %s not expected\n", sub, json ? "--json" : "--shim");
		return EXIT_USAGE;
	}
	if (strcmp(sub, "install") != 0 && strcmp(sub, "bless") != 0 &&
	    strcmp(sub, "status") != 0 && strcmp(sub, "remove") != 0) {
		fprintf(stderr, "nmbl bootcfg: unknown command '%s'\n", sub);
		return EXIT_USAGE;
	}
	r = nmbl_slots_open(ctx, esp, &s);
	if (r < 0)
		return bootcfg_fail(esp ? esp : "the ESP", r);
	if (strcmp(sub, "install") == 0) {
		char slot = 0;

		r = nmbl_slots_install(s, argv[optind], shim, &slot);
		if (r < 0) {
			nmbl_slots_free(s);
			return bootcfg_fail(argv[optind], r);
		}
		if (nmbl_slots_get_state(s, slot) == NMBL_SLOT_GOOD)
			printf("nmbl: slot %c (Boot%04X) already holds %s and boots by BootOrder\n",
			       slot, nmbl_slots_get_boot_number(s, slot), argv[optind]);
		else
			printf("nmbl: %s is in slot %c (Boot%04X), offered once at the next boot\n",
			       argv[optind], slot, nmbl_slots_get_boot_number(s, slot));
		r = EXIT_SUCCESS;
	} else if (strcmp(sub, "bless") == 0) {
		enum nmbl_bless_result res;

		r = nmbl_slots_bless(s, &res);
		if (r < 0) {
			nmbl_slots_free(s);
			return bootcfg_fail("bless", r);
		}
		switch (res) {
		case NMBL_BLESS_NOTHING:
			printf("nmbl: no slot on trial\n");
			break;
		case NMBL_BLESS_PENDING:
			printf("nmbl: the slot on trial starts at the next boot\n");
			break;
		case NMBL_BLESS_GOOD:
			printf("nmbl: slot %c booted this system: it is the good slot, first in BootOrder\n",
			       nmbl_slots_get_current(s));
			break;
		case NMBL_BLESS_FAILED:
			for (char slot = 'a'; slot <= 'b'; slot++)
				if (nmbl_slots_get_state(s, slot) == NMBL_SLOT_FAILED)
					fprintf(stderr, "nmbl: slot %c (Boot%04X) was offered and did not "
						"boot this system: BootOrder left as it was\n", slot,
						nmbl_slots_get_boot_number(s, slot));
			break;
		}
		r = EXIT_SUCCESS;
	} else if (strcmp(sub, "status") == 0) {
		r = bootcfg_status(s, json);
	} else {
		r = nmbl_slots_remove(s);
		if (r < 0) {
			nmbl_slots_free(s);
			return bootcfg_fail("remove", r);
		}
		printf("nmbl: both slots removed, BootOrder as nmbl found it\n");
		r = EXIT_SUCCESS;
	}
	nmbl_slots_free(s);
	return r;
}

int main(int argc, char **argv)
{
	struct nmbl_ctx *ctx;
	const char *verb, *root = NULL;
	bool verbose = false;
	int argi = 1, r;

	for (;;) {
		if (argc > argi && strcmp(argv[argi], "--verbose") == 0) {
			verbose = true;
			argi++;
		} else if (argc > argi + 1 && strcmp(argv[argi], "--root") == 0) {
			root = argv[argi + 1];
			argi += 2;
		} else {
			break;
		}
	}
	if (argc <= argi) {
		usage_main(stderr);
		return EXIT_USAGE;
	}
	verb = argv[argi];
	if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0) {
		usage_main(stdout);
		return EXIT_SUCCESS;
	}
	r = nmbl_new(root, &ctx);
	if (r < 0)
		return fail("init", r);
	if (verbose)
		nmbl_set_log_priority(ctx, LOG_DEBUG);

	argc -= argi;
	argv += argi;
	if (strcmp(verb, "load") == 0 || strcmp(verb, "boot") == 0) {
		r = do_load(ctx, root, argc, argv, verb[0] == 'b');
	} else if (strcmp(verb, "modprobe") == 0 || strcmp(verb, "coldplug") == 0) {
		bool cold = verb[0] == 'c';

		if (want_help(argc, argv)) {
			printf(cold ? "Usage: nmbl coldplug\nLoad the modules of the disks and keyboards present.\n"
				    : "Usage: nmbl modprobe ALIAS...\nLoad modules by name or alias (fs-ext4, a modalias), with their dependencies.\n");
			r = EXIT_SUCCESS;
		} else if (cold ? argc != 1 : argc < 2) {
			fprintf(stderr, "nmbl %s: %s\n", verb, cold ? "no arguments expected" : "ALIAS expected");
			r = EXIT_USAGE;
		} else if (cold) {
			int k = nmbl_coldplug(ctx);

			r = k < 0 ? fail(verb, k) : EXIT_SUCCESS;
		} else {
			r = EXIT_SUCCESS;
			for (int i = 1; i < argc; i++) {
				int k = nmbl_load_module(ctx, argv[i]);

				if (k < 0)
					r = fail(argv[i], k);
			}
		}
	} else if (strcmp(verb, "inspect") == 0) {
		r = do_inspect(ctx, argc, argv);
	} else if (strcmp(verb, "bootcfg") == 0) {
		r = do_bootcfg(ctx, argc, argv);
	} else if (strcmp(verb, "status") == 0) {
		bool json = argc == 2 && strcmp(argv[1], "--json") == 0;

		if (want_help(argc, argv)) {
			printf("Usage: nmbl status [--json]\n"
			       "Secure Boot, Setup Mode, lockdown, whether a kernel is loaded\n"
			       "for kexec, and the running kernel.\n");
			r = EXIT_SUCCESS;
		} else if (argc > 2 || (argc == 2 && !json)) {
			fprintf(stderr, "nmbl status: only --json expected\n");
			r = EXIT_USAGE;
		} else {
			r = do_status(ctx, json);
		}
	} else if (strcmp(verb, "exec") == 0 || strcmp(verb, "unload") == 0) {
		if (want_help(argc, argv)) {
			printf("Usage: nmbl %s\n%s\n", verb,
			       verb[0] == 'e' ? "Boot the kernel loaded for kexec (through systemd when it is PID 1)."
					      : "Forget the kernel loaded for kexec.");
			r = EXIT_SUCCESS;
		} else if (argc != 1) {
			fprintf(stderr, "nmbl %s: no arguments expected\n", verb);
			r = EXIT_USAGE;
		} else {
			int k = verb[0] == 'e' ? nmbl_exec(ctx) : nmbl_unload(ctx);

			r = k < 0 ? fail(verb, k) : EXIT_SUCCESS;
		}
	} else {
		fprintf(stderr, "nmbl: unknown verb '%s'\n", verb);
		usage_main(stderr);
		r = EXIT_USAGE;
	}
	nmbl_unref(ctx);
	return r;
}
