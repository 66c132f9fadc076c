# nmbl-fetch, a network boot's files through libcurl (included by the
# top-level Makefile).
#
# curl's release tarball (Debian's orig tarball, checked by its sha256),
# built as a static library with only what a network boot reads with:
# TFTP, HTTP and HTTPS (OpenSSL, whose libcrypto the image has already),
# no proxy, cookies, authentication schemes, IDN, HTTP/2 or compression.
# Debian's libcurl would bring 17 MB of libraries into the image (LDAP,
# Kerberos, SSH, RTMP, GnuTLS beside OpenSSL); this one adds about 0.5 MB
# and libssl.  A distribution's build may link its own instead
# (CURL_CFLAGS, CURL_LIBS from pkg-config libcurl).
CURL_VERSION = 8.22.0
CURL_SHA256 = d54dd598bf05927a726deb38df31c6a255ba83ff1de57c5d1464dac3ed8f44a1
CURL_TARBALL ?= $(CACHE)/curl_$(CURL_VERSION).orig.tar.gz
CURL_SRC = $(BUILD)/curl/curl-$(CURL_VERSION)
CURL_OBJ = $(BUILD)/curl/obj
CURL_CONFIGURE = --disable-shared --enable-static --with-pic --with-openssl \
	--disable-ftp --disable-file --disable-ipfs --disable-ldap --disable-ldaps --disable-rtsp \
	--disable-dict --disable-telnet --disable-pop3 --disable-imap --disable-smb --disable-smtp \
	--disable-gopher --disable-mqtt --disable-websockets --disable-proxy --disable-unix-sockets \
	--disable-cookies --disable-doh --disable-mime --disable-form-api --disable-netrc \
	--disable-alt-svc --disable-hsts --disable-ntlm --disable-kerberos-auth \
	--disable-negotiate-auth --disable-aws --disable-manual --disable-docs \
	--disable-libcurl-option --disable-threaded-resolver --without-ca-bundle --without-ca-path \
	--without-zlib --without-brotli --without-zstd --without-libpsl --without-libidn2 \
	--without-nghttp2 --without-ngtcp2 --without-nghttp3 --without-libssh2 --without-libssh \
	--without-libgsasl
CURL_CFLAGS ?= -I$(CURL_SRC)/include
CURL_LIBS ?= $(CURL_OBJ)/lib/.libs/libcurl.a -lssl -lcrypto
CURL_DEP ?= $(CURL_OBJ)/lib/.libs/libcurl.a

$(CURL_TARBALL):
	nmbl-loader/fetch-upstream $(CACHE) curl $(CURL_VERSION) $(CURL_SHA256)

$(CURL_SRC)/.unpacked: $(CURL_TARBALL)
	echo "$(CURL_SHA256)  $(CURL_TARBALL)" | sha256sum -c --quiet
	rm -rf $(BUILD)/curl
	mkdir -p $(BUILD)/curl
	tar -C $(BUILD)/curl -xzf $(CURL_TARBALL)
	touch $@

$(CURL_OBJ)/lib/.libs/libcurl.a: $(CURL_SRC)/.unpacked nmbl-loader/curl.mk
	rm -rf $(CURL_OBJ)
	mkdir -p $(CURL_OBJ)
	cd $(CURL_OBJ) && $(abspath $(CURL_SRC))/configure -q $(CURL_CONFIGURE) >/dev/null
	$(MAKE) -C $(CURL_OBJ)/lib -s libcurl.la >/dev/null

$(BUILD)/nmbl-loader/tools/nmbl-fetch.o: nmbl-loader/tools/nmbl-fetch.c $(CURL_DEP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(NMBL_CFLAGS) $(CURL_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/nmbl-fetch: $(BUILD)/nmbl-loader/tools/nmbl-fetch.o
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CURL_LIBS)
