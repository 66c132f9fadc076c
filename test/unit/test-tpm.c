/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <linux/kexec.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

#define SHA1 0x0004
#define SHA256 0x000b
#define SHA384 0x000c

static char kernel[4096], initrd_a[4096], initrd_b[4096];

/* A machine with a TPM 2.0 of BANKS (0-terminated; NULL: no TPM). */
static struct nmbl_ctx *setup(const uint16_t *banks)
{
	struct nmbl_ctx *ctx;

	fixture_run("rm -rf '%s/run' '%s/sys'", fixture_root(), fixture_root());
	fixture_text("/boot/vmlinuz", "MZkernel");
	fixture_text("/boot/a.img", "AAAAA");
	fixture_text("/boot/b.img", "BBB");
	fixture_text("/sys/kernel/kexec_loaded", "1\n");
	fixture_text("/proc/1/comm", "sh\n");
	snprintf(kernel, sizeof(kernel), "%s", fixture_path("/boot/vmlinuz"));
	snprintf(initrd_a, sizeof(initrd_a), "%s", fixture_path("/boot/a.img"));
	snprintf(initrd_b, sizeof(initrd_b), "%s", fixture_path("/boot/b.img"));
	memset(&fake, 0, sizeof(fake));
	fake.root = fixture_root();
	for (size_t i = 0; banks && banks[i]; i++)
		fake.tpm_banks[i] = banks[i];
	if (banks) {
		fixture_text("/sys/firmware/acpi/tables/TPM2", "TPM2");
		fixture_text("/sys/class/tpm/tpm0/tpm_version_major", "2\n");
	}
	CHECK_INT(nmbl_new(fixture_root(), &ctx), 0);
	nmbl_set_measure(ctx, true);
	return ctx;
}

static char *slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(fixture_path(path), "rb");
	char *buf = calloc(1, 1024 * 1024);
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, 1024 * 1024 - 1, f);
		fclose(f);
	}
	*ret_len = n;
	return buf;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * What a verifier does with the binary log: start from zero and extend
 * each event's digest bank by bank, as tpm2_eventlog replays it.  Each
 * record must carry a digest for every bank.  Returns the events read.
 */
static unsigned replay(const unsigned char *log, size_t len, unsigned char pcrs[4][24][64])
{
	size_t off = 32 + le32(log + 28);
	unsigned events = 0;

	memset(pcrs, 0, 4 * 24 * 64);
	CHECK(len >= 32 && memcmp(log + 32, "Spec ID Event03", 16) == 0);
	while (off + 12 <= len) {
		uint32_t pcr = le32(log + off), count = le32(log + off + 8);
		size_t p = off + 12;

		CHECK(pcr < 24);
		CHECK(fake.tpm_banks[count] == 0 && (count == 4 || fake.tpm_banks[count - 1]));
		for (uint32_t i = 0; i < count; i++) {
			uint16_t alg = (uint16_t)(log[p] | log[p + 1] << 8);
			size_t size = fake_tpm_alg_size(alg), b;
			unsigned char buf[128];
			unsigned n;

			for (b = 0; b < 4 && fake.tpm_banks[b] != alg; b++)
				;
			CHECK(b < 4);
			if (b == 4 || pcr >= 24)
				return events;
			memcpy(buf, pcrs[b][pcr], size);
			memcpy(buf + size, log + p + 2, size);
			EVP_Digest(buf, 2 * size, pcrs[b][pcr], &n,
				   EVP_get_digestbyname(fake_tpm_alg_md(alg)), NULL);
			p += 2 + size;
		}
		off = p + 4 + le32(log + p);
		events++;
	}
	CHECK_INT(off, len);
	return events;
}

/* The binary log replays to the fake TPM's PCRs 8, 9 and 11. */
static unsigned check_replay(const unsigned char *log, size_t len)
{
	unsigned char pcrs[4][24][64];
	unsigned events = replay(log, len, pcrs);

	for (size_t b = 0; b < 4 && fake.tpm_banks[b]; b++) {
		size_t size = fake_tpm_alg_size(fake.tpm_banks[b]);

		CHECK(memcmp(pcrs[b][8], fake.tpm_pcrs[b][8], size) == 0);
		CHECK(memcmp(pcrs[b][9], fake.tpm_pcrs[b][9], size) == 0);
		CHECK(memcmp(pcrs[b][11], fake.tpm_pcrs[b][11], size) == 0);
	}
	return events;
}

static unsigned count_records(const char *json, size_t len)
{
	unsigned n = 0;

	for (size_t i = 0; i < len; i++)
		n += json[i] == '\x1e';
	return n;
}

static void test_no_tpm_measures_nothing_and_boots(void)
{
	struct nmbl_ctx *ctx = setup(NULL);
	const char *initrds[] = { initrd_a };

	CHECK_INT(nmbl_tpm_present(ctx), 0);
	CHECK_INT(nmbl_measure(ctx, 8, "x", 1, "grub_cmd: x"), 0);
	CHECK_INT(nmbl_measure_kernel(ctx, kernel, "/vmlinuz"), 0);
	CHECK_INT(nmbl_measure_initrd(ctx, initrd_a, "/a.img"), 0);
	CHECK_INT(nmbl_load(ctx, kernel, initrds, 1, "root=x"), 0);
	CHECK_INT(nmbl_exec(ctx), 0);
	CHECK_STR(fake.calls, "kexec_file_load;reboot_kexec;");
	/* The initrd as it is, no measurements after it. */
	CHECK_INT(fake.kexec_initrd_len, 5);
	CHECK(access(fixture_path(NMBL_TPM_LOG), F_OK) < 0);
	CHECK(access(fixture_path(NMBL_TPM_EVENT_LOG), F_OK) < 0);
	nmbl_unref(ctx);
}

/* A program that does not ask to measure (nmbl(8) on an installed system)
 * extends nothing, though there is a TPM. */
static void test_caller_that_does_not_measure_extends_nothing(void)
{
	struct nmbl_ctx *ctx = setup((const uint16_t[]){ SHA256, 0 });
	const char *initrds[] = { initrd_a };

	nmbl_set_measure(ctx, false);
	CHECK_INT(nmbl_tpm_present(ctx), 1);
	CHECK_INT(nmbl_measure(ctx, 8, "x", 1, "grub_cmd: x"), 0);
	CHECK_INT(nmbl_load(ctx, kernel, initrds, 1, "root=x"), 0);
	CHECK_INT(nmbl_exec(ctx), 0);
	CHECK_INT(fake.tpm_extends, 0);
	CHECK_INT(fake.kexec_initrd_len, 5);
	CHECK(access(fixture_path(NMBL_TPM_LOG), F_OK) < 0);
	nmbl_unref(ctx);
}

/* The firmware has a TPM 2.0 (its ACPI table) that Linux does not show:
 * nothing can be measured, so nothing is booted. */
static void test_announced_tpm_out_of_reach_refuses_the_boot(void)
{
	struct nmbl_ctx *ctx = setup(NULL);

	fixture_text("/sys/firmware/acpi/tables/TPM2", "TPM2");
	fake.tpm_open_errno = -ENOENT;
	CHECK_INT(nmbl_tpm_present(ctx), -EUNATCH);
	CHECK_INT(nmbl_load(ctx, kernel, NULL, 0, "root=x"), -EUNATCH);
	CHECK(strstr(fake.calls, "kexec_file_load") == NULL);
	nmbl_unref(ctx);
}

static void test_tpm12_is_not_measured_into(void)
{
	struct nmbl_ctx *ctx = setup(NULL);

	fixture_text("/sys/class/tpm/tpm0/tpm_version_major", "1\n");
	CHECK_INT(nmbl_tpm_present(ctx), 0);
	CHECK(strstr(fake.calls, "tpm_open") == NULL);
	nmbl_unref(ctx);
}

static void test_bank_nmbl_cannot_hash_refuses(void)
{
	struct nmbl_ctx *ctx = setup((const uint16_t[]){ SHA256, 0x0099, 0 });

	CHECK_INT(nmbl_tpm_present(ctx), -EPROTONOSUPPORT);
	CHECK_INT(nmbl_measure(ctx, 8, "x", 1, "grub_cmd: x"), -EPROTONOSUPPORT);
	nmbl_unref(ctx);
}

/*
 * GRUB's order: the command, the kernel file, its command line, the
 * initrd files; then the load, which measures nothing again, and the
 * hand-over.  Both logs replay to the PCRs, and the kexec'd system gets
 * them in its initrd, already holding the hand-over's event.
 */
static void boot_and_replay(const uint16_t *banks)
{
	static const char cmd[] = "linux /vmlinuz root=x", args[] = "/vmlinuz root=x";
	struct nmbl_ctx *ctx = setup(banks);
	const char *initrds[] = { initrd_a, initrd_b };
	_cleanup_free_ char *json = NULL, *bin = NULL;
	size_t json_len, bin_len;
	const char *cpio, *member;

	CHECK_INT(nmbl_tpm_present(ctx), 1);
	CHECK_INT(nmbl_measure(ctx, 8, cmd, strlen(cmd), "grub_cmd: linux /vmlinuz root=x"), 0);
	CHECK_INT(nmbl_measure_kernel(ctx, kernel, "/vmlinuz"), 0);
	CHECK_INT(nmbl_measure(ctx, 8, args, strlen(args), "kernel_cmdline: /vmlinuz root=x"), 0);
	CHECK_INT(nmbl_measure_initrd(ctx, initrd_a, "/a.img"), 0);
	CHECK_INT(nmbl_measure_initrd(ctx, initrd_b, "(hd0,gpt2)/b.img"), 0);
	CHECK_INT(fake.tpm_extends, 5);
	CHECK_INT(nmbl_load(ctx, kernel, initrds, 2, "BOOT_IMAGE=/vmlinuz root=x"), 0);
	CHECK_INT(fake.tpm_extends, 5);
	CHECK_INT(nmbl_exec(ctx), 0);
	CHECK_INT(fake.tpm_extends, 6);
	CHECK(strstr(fake.calls, "tpm_extend 11;reboot_kexec;") != NULL);

	json = slurp(NMBL_TPM_LOG, &json_len);
	bin = slurp(NMBL_TPM_EVENT_LOG, &bin_len);
	CHECK_INT(check_replay((unsigned char *)bin, bin_len), 6);
	CHECK_INT(count_records(json, json_len), 6);
	CHECK(json[0] == '\x1e' && json[json_len - 1] == '\n');
	CHECK(strstr(json, "\"content_type\":\"pcclient_std\",\"content\":{\"event_type\":13,"
			   "\"event_data\":\"(hd0,gpt2)/b.img\"}}\n") != NULL);
	CHECK(strstr(json, "{\"pcr\":11,") != NULL);
	CHECK(strstr(json, "\"content_type\":\"systemd\",\"content\":{\"string\":\"leave-nmbl:kexec\","
			   "\"eventType\":\"phase\"}}\n") != NULL);
	CHECK(strstr(json, "\"hashAlg\":\"sha256\",\"digest\":\"") != NULL);

	/* The initrds as measured, then the logs as they are now. */
	CHECK(memcmp(fake.kexec_initrd, "AAAAA\0\0\0BBB\0" "070701", 18) == 0);
	cpio = fake.kexec_initrd + 12;
	member = memmem(cpio, (size_t)fake.kexec_initrd_len - 12, ".extra/nmbl/tpm2-measure.log",
			sizeof(".extra/nmbl/tpm2-measure.log"));
	CHECK(member && memmem(member, (size_t)(fake.kexec_initrd + fake.kexec_initrd_len - member),
			       json, json_len));
	member = memmem(cpio, (size_t)fake.kexec_initrd_len - 12, ".extra/nmbl/tpm2-event-log.bin",
			sizeof(".extra/nmbl/tpm2-event-log.bin"));
	CHECK(member && memmem(member, (size_t)(fake.kexec_initrd + fake.kexec_initrd_len - member),
			       bin, bin_len));
	CHECK(memmem(cpio, (size_t)fake.kexec_initrd_len - 12, "TRAILER!!!", 11) != NULL);
	nmbl_unref(ctx);
}

static void test_sha256_boot_replays_to_the_pcrs(void)
{
	boot_and_replay((const uint16_t[]){ SHA256, 0 });
}

static void test_three_banks_boot_replays_to_each(void)
{
	boot_and_replay((const uint16_t[]){ SHA1, SHA256, SHA384, 0 });
}

/* What is loaded is what was measured, even when the file changes after. */
static void test_initrd_loaded_is_the_one_measured(void)
{
	struct nmbl_ctx *ctx = setup((const uint16_t[]){ SHA256, 0 });
	const char *initrds[] = { initrd_a };

	CHECK_INT(nmbl_measure_kernel(ctx, kernel, "/vmlinuz"), 0);
	CHECK_INT(nmbl_measure_initrd(ctx, initrd_a, "/a.img"), 0);
	fixture_text("/boot/a.img", "ZZZZZ");
	CHECK_INT(nmbl_load(ctx, kernel, initrds, 1, "root=x"), 0);
	CHECK(memcmp(fake.kexec_initrd, "AAAAA", 5) == 0);
	/* Taken once: a second load measures the file as it is now. */
	CHECK_INT(nmbl_load(ctx, kernel, initrds, 1, "root=x"), 0);
	CHECK(memcmp(fake.kexec_initrd, "ZZZZZ", 5) == 0);
	CHECK_INT(fake.tpm_extends, 4);
	nmbl_unref(ctx);
}

/* Fail closed: an extension the TPM refuses is a boot refused, and a
 * kernel already loaded is unloaded rather than started unmeasured. */
static void test_failed_extension_refuses_the_boot(void)
{
	struct nmbl_ctx *ctx = setup((const uint16_t[]){ SHA256, 0 });
	_cleanup_free_ char *bin = NULL;
	size_t len;

	fake.tpm_extend_rc = 0x0101;
	CHECK_INT(nmbl_measure(ctx, 8, "x", 1, "grub_cmd: x"), -EBADE);
	CHECK_INT(nmbl_measure_kernel(ctx, kernel, "/vmlinuz"), -EBADE);
	CHECK_INT(nmbl_load(ctx, kernel, NULL, 0, "root=x"), -EBADE);
	CHECK(strstr(fake.calls, "kexec_file_load") == NULL);

	/* Nor after, though the TPM would take it: the logs lack an event. */
	fake.tpm_extend_rc = 0;
	CHECK_INT(nmbl_load(ctx, kernel, NULL, 0, "root=x"), -EBADE);
	CHECK(strstr(fake.calls, "kexec_file_load") == NULL);
	nmbl_unref(ctx);

	ctx = setup((const uint16_t[]){ SHA256, 0 });
	CHECK_INT(nmbl_load(ctx, kernel, NULL, 0, "root=x"), 0);
	fake.tpm_extend_rc = 0x0101;
	fake.calls[0] = '\0';
	CHECK(nmbl_exec(ctx) < 0);
	CHECK_STR(fake.calls, "tpm_extend 11;kexec_file_load;");
	CHECK_INT(fake.kexec_flags, KEXEC_FILE_UNLOAD);
	/* Only what was extended is in the log. */
	bin = slurp(NMBL_TPM_EVENT_LOG, &len);
	CHECK_INT(check_replay((unsigned char *)bin, len), 1);
	nmbl_unref(ctx);
}

/* A firmware log in securityfs is where nmbl's binary log starts. */
static void test_binary_log_starts_as_the_firmwares(void)
{
	struct nmbl_ctx *ctx = setup((const uint16_t[]){ SHA256, 0 });
	_cleanup_free_ char *bin = NULL;
	unsigned char fw[32 + 33 + 12 + 34 + 4 + 2] = { 0 };
	size_t len;

	/* A Spec ID header for sha256, then a PCR 0 event. */
	fw[4] = 3;
	fw[28] = 33;
	memcpy(fw + 32, "Spec ID Event03", 16);
	fw[32 + 21] = 2;
	fw[32 + 23] = 2;
	fw[32 + 24] = 1;
	fw[32 + 28] = SHA256;
	fw[32 + 30] = 32;
	fw[65 + 4] = 8;
	fw[65 + 8] = 1;
	fw[65 + 12] = SHA256;
	fw[65 + 14 + 32] = 2;
	fw[65 + 14 + 36] = 'f';
	fw[65 + 14 + 37] = 'w';
	fixture_write("/sys/kernel/security/tpm0/binary_bios_measurements", fw, sizeof(fw));
	CHECK_INT(nmbl_measure(ctx, 9, "x", 1, "(hd0,gpt1)/EFI/fedora/grub.cfg"), 0);
	bin = slurp(NMBL_TPM_EVENT_LOG, &len);
	CHECK_INT(len, sizeof(fw) + 12 + 34 + 4 + sizeof("(hd0,gpt1)/EFI/fedora/grub.cfg"));
	CHECK(memcmp(bin, fw, sizeof(fw)) == 0);
	nmbl_unref(ctx);
}

/*
 * An initrd or a kernel larger than nmbl may hold in memory (1 GiB at
 * most): a sparse file of 1 GiB and a byte is refused, -EFBIG, before
 * anything of it is read, copied or measured.  Before, without a TPM the
 * initrd was held and the kernel read whole, and with a TPM the initrd
 * was copied whole into memory: a sparse "initrd" of many GiB filled it,
 * and the OOM killer killed process 1, a kernel panic.
 */
static void test_what_memory_cannot_hold_is_refused(void)
{
	for (int tpm = 0; tpm < 2; tpm++) {
		struct nmbl_ctx *ctx = setup(tpm ? (const uint16_t[]){ SHA256, 0 } : NULL);
		char *huge = fixture_image("/boot/huge.img", ((off_t)1 << 30) + 1);
		unsigned extends;

		CHECK_INT(nmbl_measure_kernel(ctx, kernel, "/vmlinuz"), 0);
		extends = fake.tpm_extends;
		CHECK_INT(nmbl_measure_initrd(ctx, huge, "/huge.img"), -EFBIG);
		CHECK_INT((int)ctx->n_initrds, 0);
		CHECK_INT(nmbl_measure_initrd(ctx, initrd_a, "/a.img"), 0);
		CHECK_INT(nmbl_measure_kernel(ctx, huge, "/huge"), -EFBIG);
		CHECK_INT(fake.tpm_extends, extends + (unsigned)tpm);
		CHECK(strstr(nmbl_strerror(-EFBIG), "at most 1 GiB") != NULL);
		unlink(huge);
		free(huge);
		nmbl_unref(ctx);
	}
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_no_tpm_measures_nothing_and_boots,
		test_caller_that_does_not_measure_extends_nothing,
		test_announced_tpm_out_of_reach_refuses_the_boot,
		test_tpm12_is_not_measured_into,
		test_bank_nmbl_cannot_hash_refuses,
		test_sha256_boot_replays_to_the_pcrs,
		test_three_banks_boot_replays_to_each,
		test_initrd_loaded_is_the_one_measured,
		test_failed_extension_refuses_the_boot,
		test_binary_log_starts_as_the_firmwares,
		test_what_memory_cannot_hold_is_refused,
		NULL,
	};

	return unit_main(tests);
}
