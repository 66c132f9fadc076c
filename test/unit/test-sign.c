/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

static struct nmbl_ctx *ctx;

static char *explain(const char *file, int err)
{
	char *text = NULL;

	CHECK_INT(nmbl_explain_refusal(ctx, file, err, &text), 0);
	return text ? text : strdup("");
}

static void test_untrusted_signer_and_trusted_keys(void)
{
	char *t = explain(CORPUS "/kernel-signed.efi", -ENOKEY);

	CHECK(strstr(t, "It is signed by 'SnakeOil' (issued by 'SnakeOil').\n"));
	CHECK(strstr(t, "  .builtin_trusted_keys: 'Debian Secure Boot CA: 6cce'\n"));
	CHECK(strstr(t, "  .platform: 'Vendor db key: 1234', 'Other db key: 5678'\n"));
	/* A keyring the kernel does not list is left out, not invented. */
	CHECK(!strstr(t, ".machine"));
	CHECK(strstr(t, "mokutil --import"));
	free(t);
}

static void test_unsigned_truncated_and_not_a_kernel(void)
{
	char *t = explain(CORPUS "/kernel.efi", -ENODATA);
	FILE *in, *out;
	char buf[8192];
	size_t n;

	CHECK(strstr(t, "It carries no signature."));
	free(t);
	/* A UKI whose inner kernel is unsigned: that is what kexec checks. */
	t = explain(CORPUS "/uki.efi", -ENODATA);
	CHECK(strstr(t, "The kernel inside this UKI carries no signature of its own"));
	free(t);

	in = fopen(CORPUS "/kernel-signed.efi", "rb");
	n = in ? fread(buf, 1, sizeof(buf), in) : 0;
	if (in)
		fclose(in);
	fixture_write("/truncated.efi", buf, n - 100);
	t = explain(fixture_path("/truncated.efi"), -ELIBBAD);
	CHECK(strstr(t, "The file is truncated"));
	free(t);

	fixture_text("/notes.txt", "this is not a kernel\n");
	t = explain(fixture_path("/notes.txt"), -ENOEXEC);
	CHECK(strstr(t, "not a PE image"));
	free(t);

	(void)out;
	/* Errors that are no verdict on the image add nothing. */
	t = explain(CORPUS "/kernel-signed.efi", -ENOSYS);
	CHECK_STR(t, "");
	free(t);
	t = NULL;
	CHECK_INT(nmbl_explain_refusal(ctx, fixture_path("/missing.efi"), -ENOKEY, &t), -ENOENT);
	CHECK(t == NULL);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_untrusted_signer_and_trusted_keys,
		test_unsigned_truncated_and_not_a_kernel,
		NULL,
	};

	fixture_text("/proc/keys",
		     "0b5b2dc2 I------     1 perm 1f0b0000     0     0 keyring   .builtin_trusted_keys: 1\n"
		     "1a2b3c4d I------     1 perm 1f0b0000     0     0 keyring   .secondary_trusted_keys: 1\n"
		     "2f000001 I------     1 perm 1f0f0000     0     0 keyring   .platform: 2\n"
		     "30000002 I------     1 perm 1f030000     0     0 asymmetri Debian Secure Boot CA: 6cce: X509.rsa 4e5a []\n");
	fake.keys[0].keyring = 0x0b5b2dc2;
	fake.keys[0].id = 0x30000002;
	fake.keys[0].description = "Debian Secure Boot CA: 6cce";
	fake.keys[1].keyring = 0x2f000001;
	fake.keys[1].id = 0x30000003;
	fake.keys[1].description = "Vendor db key: 1234";
	fake.keys[2].keyring = 0x2f000001;
	fake.keys[2].id = 0x30000004;
	fake.keys[2].description = "Other db key: 5678";
	return unit_main_ctx(tests, &ctx);
}
